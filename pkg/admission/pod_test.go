package admission

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func direct(eipName string) map[string]string {
	return map[string]string{v1alpha1.AnnotationElasticIP: eipName}
}

// launcher is a KubeVirt virt-launcher Pod of the VM vm.
func launcher(name, vm string, ann map[string]string) *corev1.Pod {
	p := pod(name, ann)
	p.Labels = map[string]string{v1alpha1.LabelKubeVirt: v1alpha1.LabelKubeVirtLauncher, v1alpha1.LabelKubeVirtVMName: vm}
	return p
}

func TestPodRules(t *testing.T) {
	held := func(f *fixture) { f.cached(eip("e", "net", ""), pod("old", direct("e")), nic("old", "eth0", "e")) }
	runRuleCases(t, []ruleCase{
		{name: "no annotations", obj: pod("web", nil), want: allowed()},
		{name: "unrelated annotations", obj: pod("web", map[string]string{"example.com/a": "b"}), want: allowed()},
		{name: "malformed networks", obj: pod("web", map[string]string{v1alpha1.AnnotationNetworks: `[{"interface":"ext0",}]`}),
			want: invalid(`metadata.annotations[juneau.loutres.me/networks]`, `not valid JSON`)},
		{name: "elastic-ip and networks give eth0 twice",
			obj:  pod("web", map[string]string{v1alpha1.AnnotationElasticIP: "a", v1alpha1.AnnotationNetworks: `[{"interface":"eth0","elasticIP":"b"}]`}),
			want: invalid(`metadata.annotations[juneau.loutres.me/networks][0].interface`)},
		{name: "bad bandwidth alias", obj: pod("web", map[string]string{v1alpha1.AliasEIPBandwidth: "fast"}),
			want: invalid(`metadata.annotations[network.alibabacloud.com/eip-bandwidth]`)},
		{name: "direct use of a free ElasticIP", setup: func(f *fixture) { f.cached(eip("e", "net", "")) },
			obj: pod("web", direct("e")), want: allowed()},
		{name: "direct use of a missing ElasticIP waits for it", obj: pod("web", direct("later")), want: allowed()},
		{name: "ElasticIP attached by NAT", setup: func(f *fixture) {
			f.cached(eip("e", "net", ""), attachment("att", "e", "api.eth0"))
		}, obj: pod("web", direct("e")),
			want: invalid(`metadata.annotations[juneau.loutres.me/elastic-ip]`, `ElasticIPAttachment "att"`)},
		{name: "ElasticIP attached by NAT, attachment not yet in the cache", setup: func(f *fixture) {
			f.cached(eip("e", "net", ""))
			f.live(attachment("att", "e", "api.eth0"))
		}, obj: pod("web", direct("e")), want: invalid(`ElasticIPAttachment "att"`)},
		{name: "ElasticIP attached by a deleting attachment", setup: func(f *fixture) {
			f.cached(eip("e", "net", ""), deleting(attachment("att", "e", "api.eth0")))
		}, obj: pod("web", direct("e")), want: allowed()},
		{name: "held by a running Pod's NIC", setup: held, obj: pod("web", direct("e")),
			want: invalid(`metadata.annotations[juneau.loutres.me/elastic-ip]`, `NetworkInterface "old.eth0" of running Pod "old"`)},
		{name: "held through an extra NIC", setup: func(f *fixture) {
			f.cached(eip("e", "net", ""), pod("old", nil), nic("old", "ext0", "e"))
		}, obj: pod("web", map[string]string{v1alpha1.AnnotationNetworks: `[{"interface":"ext1"},{"interface":"ext0","elasticIP":"e"}]`}),
			want: invalid(`metadata.annotations[juneau.loutres.me/networks][1].elasticIP`, `NetworkInterface "old.ext0"`)},
		{name: "held by a NIC not yet in the cache", setup: func(f *fixture) {
			f.cached(eip("e", "net", ""), pod("old", direct("e")))
			f.live(nic("old", "eth0", "e"))
		}, obj: pod("web", direct("e")), want: invalid(`NetworkInterface "old.eth0"`)},
		{name: "holder's Pod not yet in the cache", setup: func(f *fixture) {
			f.cached(eip("e", "net", ""), nic("old", "eth0", "e"))
			f.live(pod("old", direct("e")))
		}, obj: pod("web", direct("e")), want: invalid(`Pod "old"`)},
		{name: "holder Pod terminating", setup: func(f *fixture) {
			f.cached(eip("e", "net", ""), deleting(pod("old", direct("e"))), nic("old", "eth0", "e"))
		}, obj: pod("web", direct("e")), want: allowed()},
		{name: "holder Pod finished", setup: func(f *fixture) {
			p := pod("old", direct("e"))
			p.Status.Phase = corev1.PodFailed
			f.cached(eip("e", "net", ""), p, nic("old", "eth0", "e"))
		}, obj: pod("web", direct("e")), want: allowed()},
		{name: "holder Pod gone", setup: func(f *fixture) { f.cached(eip("e", "net", ""), nic("old", "eth0", "e")) },
			obj: pod("web", direct("e")), want: allowed()},
		{name: "holder NIC of an earlier Pod of the same name", setup: func(f *fixture) {
			n := nic("web", "eth0", "e")
			n.Spec.PodRef.UID = "earlier"
			f.cached(eip("e", "net", ""), n)
		}, obj: pod("web", direct("e")), want: allowed()},
		{name: "deleting NIC the ElasticIP did not pick", setup: func(f *fixture) {
			f.cached(eip("e", "net", ""), pod("old", direct("e")), deleting(nic("old", "eth0", "e")))
		}, obj: pod("web", direct("e")), want: allowed()},
		{name: "deleting NIC that still holds the ElasticIP", setup: func(f *fixture) {
			e := eip("e", "net", "")
			n := deleting(nic("old", "eth0", "e"))
			e.Status.Attachment = &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindNetworkInterface, Name: "old.eth0", UID: n.UID}
			f.cached(e, pod("old", direct("e")), n)
		}, obj: pod("web", direct("e")), want: invalid(`NetworkInterface "old.eth0"`)},
		{name: "deleting NIC of the name the ElasticIP records, but another object", setup: func(f *fixture) {
			e := eip("e", "net", "")
			e.Status.Attachment = &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindNetworkInterface, Name: "old.eth0", UID: "earlier"}
			f.cached(e, pod("old", direct("e")), deleting(nic("old", "eth0", "e")))
		}, obj: pod("web", direct("e")), want: allowed()},
		{name: "a NIC made after its Pod's network was set up holds nothing", setup: func(f *fixture) {
			n := nic("old", "ext0", "e")
			n.Spec.CreatedAfterPodNetwork = true
			f.cached(eip("e", "net", ""), pod("old", nil), n)
		}, obj: pod("web", direct("e")), want: allowed()},
		{name: "same allocationIdentity takes over", setup: func(f *fixture) {
			n := nic("old", "eth0", "e")
			n.Spec.AllocationIdentity = "vmi.vm1"
			f.cached(eip("e", "net", ""), launcher("old", "vm1", direct("e")), n)
		}, obj: launcher("web", "vm1", direct("e")), want: allowed()},
		{name: "identity computed from the holder Pod", setup: func(f *fixture) {
			f.cached(eip("e", "net", ""), launcher("old", "vm1", direct("e")), nic("old", "eth0", "e"))
		}, obj: launcher("web", "vm1", direct("e")), want: allowed()},
		{name: "another VM's launcher", setup: func(f *fixture) {
			n := nic("old", "eth0", "e")
			n.Spec.AllocationIdentity = "vmi.vm1"
			f.cached(eip("e", "net", ""), launcher("old", "vm1", direct("e")), n)
		}, obj: launcher("web", "vm2", direct("e")), want: invalid(`Pod "old"`)},
		{name: "update changing only automatic annotations", op: admissionv1.Update, setup: held,
			obj: pod("web", map[string]string{v1alpha1.AnnotationElasticIP: "e", v1alpha1.AnnotationEIPBandwidth: "100"}),
			old: pod("web", direct("e")), want: allowed()},
		{name: "update writing back the allocated ElasticIP", op: admissionv1.Update,
			obj: pod("web", map[string]string{v1alpha1.AnnotationPodWithEIP: "true", v1alpha1.AnnotationAllocatedEIPName: "web-eip"}),
			old: pod("web", map[string]string{v1alpha1.AnnotationPodWithEIP: "true"}), want: allowed()},
		{name: "direct-use annotation added to an existing Pod", op: admissionv1.Update, setup: held,
			obj: pod("web", direct("e")), old: pod("web", map[string]string{v1alpha1.AnnotationPodWithEIP: "false"}),
			want: invalid(`metadata.annotations[juneau.loutres.me/elastic-ip]: Forbidden: cannot be added to an existing Pod`, `delete the Pod and create it again`)},
		{name: "direct-use annotation changed", op: admissionv1.Update,
			obj: pod("web", direct("f")), old: pod("web", direct("e")),
			want: invalid(`metadata.annotations[juneau.loutres.me/elastic-ip]: Forbidden: cannot be changed on an existing Pod`)},
		{name: "direct-use annotation removed", op: admissionv1.Update,
			obj:  pod("web", map[string]string{v1alpha1.AnnotationElasticIP: "e"}),
			old:  pod("web", map[string]string{v1alpha1.AnnotationElasticIP: "e", v1alpha1.AnnotationNetworks: `[{"interface":"ext0","elasticIP":"g"}]`}),
			want: invalid(`metadata.annotations[juneau.loutres.me/networks]: Forbidden: cannot be removed from an existing Pod`)},
		{name: "direct-use annotations removed with the rest of the juneau annotations", op: admissionv1.Update,
			obj: pod("web", map[string]string{"example.com/a": "b"}), old: pod("web", direct("e")),
			want: invalid(`metadata.annotations[juneau.loutres.me/elastic-ip]: Forbidden: cannot be removed`)},
		{name: "update breaking the grammar", op: admissionv1.Update,
			obj: pod("web", map[string]string{v1alpha1.AnnotationPodWithEIP: "yes"}), old: pod("web", nil),
			want: invalid(`metadata.annotations[juneau.loutres.me/pod-with-eip]`)},
		{name: "update of a terminating Pod", op: admissionv1.Update,
			obj: pod("web", map[string]string{v1alpha1.AnnotationPodWithEIP: "yes"}), old: deleting(pod("web", nil)), want: allowed()},
		{name: "the Pod's own NIC", setup: func(f *fixture) {
			f.cached(eip("e", "net", ""), nic("web", "eth0", "e"))
		}, obj: pod("web", map[string]string{v1alpha1.AnnotationElasticIP: "e", v1alpha1.AnnotationNetworks: `[{"interface":"ext0"}]`}),
			want: allowed()},
	})
}

// namedEIP asks to attach an existing ElasticIP by NAT, by juneau's key or the managed-cloud one.
func namedEIP(key, eipName string) map[string]string { return map[string]string{key: eipName} }

// automaticAttachment is the attachment the controller made for Pod p.
func automaticAttachment(p, eipName string) *v1alpha1.ElasticIPAttachment {
	a := attachment(p, eipName, p+".eth0")
	a.Labels = map[string]string{v1alpha1.LabelPod: p}
	return a
}

// A Pod naming, by any key, an ElasticIP another Pod uses is refused as direct use is,
// naming that Pod; an ElasticIP that only a terminating, finished or gone Pod used, or an
// earlier Pod of the same name, is handed over.
func TestPodNamingAnElasticIPInUse(t *testing.T) {
	var cases []ruleCase
	for _, key := range []string{v1alpha1.AnnotationPodEIPName, v1alpha1.AliasPodEIPInstance} {
		path := `metadata.annotations[` + key + `]`
		cases = append(cases,
			ruleCase{name: key + ": free", setup: func(f *fixture) { f.cached(eip("e", "net", "")) },
				obj: pod("web", namedEIP(key, "e")), want: allowed()},
			ruleCase{name: key + ": attached by NAT to a running Pod", setup: func(f *fixture) {
				f.cached(eip("e", "net", ""), pod("nginx", nil), attachment("nginx-attach", "e", "nginx.eth0"))
			}, obj: pod("web", namedEIP(key, "e")),
				want: invalid(path+`: Invalid value: "e": ElasticIP "e" is used by Pod "nginx" (through ElasticIPAttachment "nginx-attach")`,
					`an ElasticIP serves one Pod at a time`)},
			ruleCase{name: key + ": another Pod's automatic attachment, not yet in the cache", setup: func(f *fixture) {
				f.cached(eip("e", "net", ""), pod("first", namedEIP(key, "e")))
				f.live(automaticAttachment("first", "e"))
			}, obj: pod("web", namedEIP(key, "e")), want: invalid(`ElasticIP "e" is used by Pod "first" (through ElasticIPAttachment "first")`)},
			ruleCase{name: key + ": used directly by a running Pod", setup: func(f *fixture) {
				f.cached(eip("e", "net", ""), pod("old", direct("e")), nic("old", "eth0", "e"))
			}, obj: pod("web", namedEIP(key, "e")), want: invalid(path, `ElasticIP "e" is used by Pod "old" (directly, NetworkInterface "old.eth0")`)},
			ruleCase{name: key + ": the user's attachment to a Pod that is gone", setup: func(f *fixture) {
				f.cached(eip("e", "net", ""), attachment("att", "e", "gone.eth0"))
			}, obj: pod("web", namedEIP(key, "e")), want: invalid(`ElasticIPAttachment "att" (to NetworkInterface "gone.eth0")`)},
			ruleCase{name: key + ": the user of a terminating Pod hands over", setup: func(f *fixture) {
				f.cached(eip("e", "net", ""), deleting(pod("nginx", nil)), attachment("nginx-attach", "e", "nginx.eth0"))
			}, obj: pod("web", namedEIP(key, "e")), want: allowed()},
			ruleCase{name: key + ": the automatic attachment of a Pod that is gone goes with it", setup: func(f *fixture) {
				f.cached(eip("e", "net", ""), automaticAttachment("first", "e"))
			}, obj: pod("web", namedEIP(key, "e")), want: allowed()},
			ruleCase{name: key + ": an earlier Pod of the same name", setup: func(f *fixture) {
				f.cached(eip("e", "net", ""), automaticAttachment("web", "e"))
			}, obj: pod("web", namedEIP(key, "e")), want: allowed()},
			ruleCase{name: key + ": another Pod only names it (the controller decides)", setup: func(f *fixture) {
				f.cached(eip("e", "net", ""), pod("other", namedEIP(key, "e")))
			}, obj: pod("web", namedEIP(key, "e")), want: allowed()},
			ruleCase{name: key + ": named by an update", op: admissionv1.Update, setup: func(f *fixture) {
				f.cached(eip("e", "net", ""), pod("nginx", nil), attachment("nginx-attach", "e", "nginx.eth0"))
			}, obj: pod("web", namedEIP(key, "e")), old: pod("web", namedEIP(key, "f")), want: invalid(path, `Pod "nginx"`)},
			ruleCase{name: key + ": an update that keeps the name is not checked again", op: admissionv1.Update, setup: func(f *fixture) {
				f.cached(eip("e", "net", ""), pod("nginx", nil), attachment("nginx-attach", "e", "nginx.eth0"))
			}, obj: pod("web", map[string]string{key: "e", v1alpha1.AnnotationEIPBandwidth: "5"}), old: pod("web", namedEIP(key, "e")), want: allowed()},
		)
	}
	runRuleCases(t, cases)
}
