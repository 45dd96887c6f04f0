package admission

import (
	"testing"

	"golang.org/x/time/rate"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func TestElasticIPAttachmentRules(t *testing.T) {
	base := func(f *fixture) { f.cached(eip("e", "net", ""), nic("web", "eth0", ""), pod("web", nil)) }
	runRuleCases(t, []ruleCase{
		{name: "valid", setup: base, obj: attachment("att", "e", "web.eth0"), want: allowed()},
		{name: "namespaced reference", setup: base, obj: attachment("att", "other/e", "web.eth0"),
			want: invalid(`spec.elasticIPRef.name`, `same namespace`)},
		{name: "target is not a NIC name", setup: base, obj: attachment("att", "e", "web"),
			want: invalid(`spec.targetRef.networkInterfaceName`, `<pod>.<interface>`)},
		{name: "missing ElasticIP", setup: base, obj: attachment("att", "nope", "web.eth0"),
			want: invalid(`spec.elasticIPRef.name`, `ElasticIP "nope" does not exist`)},
		{name: "ElasticIP not yet in the cache", obj: attachment("att", "fresh", "web.eth0"),
			setup: func(f *fixture) { base(f); f.live(eip("fresh", "net", "")) }, want: allowed()},
		{name: "deleting ElasticIP", obj: attachment("att", "e", "web.eth0"),
			setup: func(f *fixture) { f.cached(deleting(eip("e", "net", "")), nic("web", "eth0", "")) },
			want:  invalid(`spec.elasticIPRef.name`, `ElasticIP "e" is being deleted`)},
		{name: "missing NIC and Pod", setup: base, obj: attachment("att", "e", "db.eth0"),
			want: invalid(`spec.targetRef.networkInterfaceName`, `NetworkInterface "db.eth0" does not exist`, `Pod "db"`)},
		{name: "NIC not yet in the cache", obj: attachment("att", "e", "fresh.eth0"),
			setup: func(f *fixture) { base(f); f.live(nic("fresh", "eth0", "")) }, want: allowed()},
		{name: "NIC pending: the Pod exists", obj: attachment("att", "e", "api.eth0"),
			setup: func(f *fixture) { base(f); f.cached(pod("api", nil)) }, want: allowed()},
		{name: "NIC pending, no live read left: the cached Pod decides", obj: attachment("att", "e", "api.eth0"),
			setup: func(f *fixture) { base(f); f.cached(pod("api", nil)); f.v.r.live.limiter = rate.NewLimiter(0, 0) }, want: allowed()},
		{name: "NIC pending, no live read left: the Pod's annotations still refuse", obj: attachment("att", "e", "api.eth0"),
			setup: func(f *fixture) {
				base(f)
				f.cached(pod("api", map[string]string{v1alpha1.AnnotationElasticIP: "other"}))
				f.v.r.live.limiter = rate.NewLimiter(0, 0)
			}, want: invalid(`spec.targetRef.networkInterfaceName`, `ElasticIP "other" directly`)},
		{name: "NIC pending: Pod with dots in its name", obj: attachment("att", "e", "api.v2.eth0"),
			setup: func(f *fixture) { base(f); f.cached(pod("api.v2", nil)) }, want: allowed()},
		{name: "NIC pending: extra interface of the Pod", obj: attachment("att", "e", "api.ext0"),
			setup: func(f *fixture) {
				base(f)
				f.cached(pod("api", map[string]string{v1alpha1.AnnotationNetworks: `[{"interface":"ext0"}]`}))
			}, want: allowed()},
		{name: "NIC pending: the Pod has no such interface", obj: attachment("att", "e", "api.ext0"),
			setup: func(f *fixture) { base(f); f.cached(pod("api", nil)) },
			want:  invalid(`spec.targetRef.networkInterfaceName`, `Pod "api" has no interface "ext0"`)},
		{name: "NIC pending: the interface will carry an ElasticIP directly", obj: attachment("att", "e", "api.eth0"),
			setup: func(f *fixture) {
				base(f)
				f.cached(pod("api", map[string]string{v1alpha1.AnnotationElasticIP: "other"}))
			}, want: invalid(`spec.targetRef.networkInterfaceName`, `ElasticIP "other" directly`, `Pod "api"`)},
		{name: "NIC pending: the Pod is terminating", obj: attachment("att", "e", "api.eth0"),
			setup: func(f *fixture) { base(f); f.cached(deleting(pod("api", nil))) },
			want:  invalid(`spec.targetRef.networkInterfaceName`, `terminating`)},
		{name: "NIC pending: the Pod uses the host network", obj: attachment("att", "e", "api.eth0"),
			setup: func(f *fixture) {
				base(f)
				p := pod("api", nil)
				p.Spec.HostNetwork = true
				f.cached(p)
			}, want: invalid(`spec.targetRef.networkInterfaceName`, `host network`)},
		{name: "NIC being deleted", obj: attachment("att", "e", "web.eth0"),
			setup: func(f *fixture) { f.cached(eip("e", "net", ""), deleting(nic("web", "eth0", ""))) },
			want:  invalid(`spec.targetRef.networkInterfaceName`, `NetworkInterface "web.eth0" is being deleted`)},
		{name: "NIC carries an ElasticIP directly", obj: attachment("att", "e", "web.eth0"),
			setup: func(f *fixture) { f.cached(eip("e", "net", ""), nic("web", "eth0", "other")) },
			want:  invalid(`spec.targetRef.networkInterfaceName`, `NetworkInterface "web.eth0" carries ElasticIP "other" directly`)},
		{name: "ElasticIP used directly by a NIC", obj: attachment("att", "e", "web.eth0"),
			setup: func(f *fixture) { base(f); f.cached(nic("db", "eth0", "e")) },
			want:  invalid(`spec.elasticIPRef.name`, `used directly by NetworkInterface "db.eth0"`)},
		{name: "ElasticIP used directly by a deleting NIC", obj: attachment("att", "e", "web.eth0"),
			setup: func(f *fixture) { base(f); f.cached(deleting(nic("db", "eth0", "e"))) },
			want:  invalid(`spec.elasticIPRef.name`, `NetworkInterface "db.eth0" (being deleted)`)},
		{name: "ElasticIP used directly by a NIC not yet in the cache", obj: attachment("att", "e", "web.eth0"),
			setup: func(f *fixture) { base(f); f.live(nic("db", "eth0", "e")) },
			want:  invalid(`spec.elasticIPRef.name`, `NetworkInterface "db.eth0"`)},
		{name: "ElasticIP named by a Pod whose NIC does not exist yet", obj: attachment("att", "e", "web.eth0"),
			setup: func(f *fixture) {
				base(f)
				f.cached(pod("db", map[string]string{v1alpha1.AnnotationNetworks: `[{"interface":"ext0","elasticIP":"e"}]`}))
			}, want: invalid(`spec.elasticIPRef.name`, `Pod "db" (in its direct-use annotations)`)},
		{name: "ElasticIP named by a finished Pod", obj: attachment("att", "e", "web.eth0"),
			setup: func(f *fixture) {
				base(f)
				p := pod("db", map[string]string{v1alpha1.AnnotationElasticIP: "e"})
				p.Status.Phase = corev1.PodSucceeded
				f.cached(p)
			}, want: allowed()},
		{name: "second attachment of the ElasticIP", obj: attachment("att", "e", "web.eth0"),
			setup: func(f *fixture) { base(f); f.cached(attachment("first", "e", "api.eth0")) },
			want:  invalid(`spec.elasticIPRef.name`, `already attached by ElasticIPAttachment "first"`)},
		{name: "second attachment of the ElasticIP, first not yet in the cache", obj: attachment("att", "e", "web.eth0"),
			setup: func(f *fixture) { base(f); f.live(attachment("first", "e", "api.eth0")) },
			want:  invalid(`spec.elasticIPRef.name`, `ElasticIPAttachment "first"`)},
		{name: "the other attachment is being deleted", obj: attachment("att", "e", "web.eth0"),
			setup: func(f *fixture) { base(f); f.cached(deleting(attachment("first", "e", "web.eth0"))) }, want: allowed()},
		{name: "second attachment on the NIC", obj: attachment("att", "e", "web.eth0"),
			setup: func(f *fixture) { base(f); f.cached(eip("e2", "net", ""), attachment("first", "e2", "web.eth0")) },
			want:  invalid(`spec.targetRef.networkInterfaceName`, `already the target of ElasticIPAttachment "first" for an IPv4 ElasticIP`)},
		{name: "an IPv6 attachment beside an IPv4 one on the NIC", obj: attachment("att", "six", "web.eth0"),
			setup: func(f *fixture) { base(f); f.cached(eip6("six", "net", ""), attachment("first", "e", "web.eth0")) },
			want:  allowed()},
		{name: "second IPv6 attachment on the NIC", obj: attachment("att", "six", "web.eth0"),
			setup: func(f *fixture) {
				base(f)
				f.cached(eip6("six", "net", ""), eip6("six2", "net", ""), attachment("first", "e", "web.eth0"), attachment("second", "six2", "web.eth0"))
			},
			want: invalid(`spec.targetRef.networkInterfaceName`, `already the target of ElasticIPAttachment "second" for an IPv6 ElasticIP`)},
		{name: "IPv6 ElasticIP on a NIC whose Pod has no IPv6 address", obj: attachment("att", "six", "web.eth0"),
			setup: func(f *fixture) {
				n := nic("web", "eth0", "")
				n.Status.Address, n.Status.Addresses = "10.244.1.5/32", []string{"10.244.1.5/32"}
				f.cached(eip("e", "net", ""), eip6("six", "net", ""), n)
			},
			want: invalid(`spec.targetRef.networkInterfaceName`, `NetworkInterface "web.eth0" of Pod "web" has no IPv6 address (10.244.1.5)`, "no NAT64")},
		{name: "IPv6 ElasticIP on a dual-stack Pod's NIC", obj: attachment("att", "six", "web.eth0"),
			setup: func(f *fixture) {
				n := nic("web", "eth0", "")
				n.Status.Address, n.Status.Addresses = "10.244.1.5/32", []string{"10.244.1.5/32", "fd00:244::5/128"}
				f.cached(eip6("six", "net", ""), n)
			},
			want: allowed()},
		{name: "IPv4 ElasticIP on an IPv6-only Pod's NIC", obj: attachment("att", "e", "web.eth0"),
			setup: func(f *fixture) {
				n := nic("web", "eth0", "")
				n.Status.Address, n.Status.Addresses = "fd00:244::5/128", []string{"fd00:244::5/128"}
				f.cached(eip("e", "net", ""), n)
			},
			want: invalid(`spec.targetRef.networkInterfaceName`, `has no IPv4 address (fd00:244::5)`)},
		{name: "IPv6 ElasticIP on a NIC without addresses yet", obj: attachment("att", "six", "web.eth0"),
			setup: func(f *fixture) { f.cached(eip6("six", "net", ""), nic("web", "eth0", "")) },
			want:  allowed()},
		{name: "second attachment on a pending NIC", obj: attachment("att", "e", "api.eth0"),
			setup: func(f *fixture) { base(f); f.cached(pod("api", nil)); f.live(attachment("first", "e2", "api.eth0")) },
			want:  invalid(`spec.targetRef.networkInterfaceName`, `ElasticIPAttachment "first"`)},
		{name: "spec is immutable", op: admissionv1.Update,
			obj: attachment("att", "e2", "web.eth0"), old: attachment("att", "e", "web.eth0"),
			want: invalid(`spec.elasticIPRef.name`, `immutable`)},
		{name: "relabel after the NIC is gone", op: admissionv1.Update,
			obj: withLabels(attachment("att", "e", "gone.eth0"), "a", "b"), old: attachment("att", "e", "gone.eth0"), want: allowed()},
	})
}
