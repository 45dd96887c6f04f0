package admission

import (
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// namespace is a Namespace with labels given as key, value, ...
func namespace(name string, kv ...string) *corev1.Namespace {
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("ns-" + name),
		Annotations: map[string]string{"example.com/big": strings.Repeat("x", 100)}}}
	return withLabels(n, kv...)
}

// fenced is network name on pool a, admitting the namespaces labelled tenant=a.
func fenced(name string) *v1alpha1.ExternalNetwork {
	return selecting(network(name, arp, "a"), &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}})
}

func selecting(n *v1alpha1.ExternalNetwork, sel *metav1.LabelSelector) *v1alpha1.ExternalNetwork {
	n.Spec.NamespaceSelector = sel
	return n
}

func asDefault(n *v1alpha1.ExternalNetwork) *v1alpha1.ExternalNetwork {
	n.Annotations = map[string]string{v1alpha1.AnnotationDefaultNetwork: "true"}
	return n
}

// unjudged: the webhook could not judge the request (it is denied).
func unjudged(want ...string) verdictCase {
	return verdictCase{code: http.StatusInternalServerError, want: want}
}

// refusedFor is the refusal of ns by the network net selecting tenant=a.
func refusedFor(path, net string) verdictCase {
	return invalid(path, `Forbidden: ExternalNetwork "`+net+`" does not admit namespace "`+ns+`"`,
		`(its spec.namespaceSelector "tenant=a" does not match the namespace's labels)`)
}

func TestElasticIPTenancy(t *testing.T) {
	poolA := pool("a", arp, "10.225.51.0/24")
	runRuleCases(t, []ruleCase{
		{name: "no selector: every namespace, none read", obj: eip("e", "net", ""),
			setup: func(f *fixture) { f.cached(poolA, network("net", arp, "a")) }, want: allowed()},
		{name: "empty selector: every namespace, none read", obj: eip("e", "net", ""),
			setup: func(f *fixture) { f.cached(poolA, selecting(network("net", arp, "a"), &metav1.LabelSelector{})) },
			want:  allowed()},
		{name: "namespace selected", obj: eip("e", "net", ""),
			setup: func(f *fixture) { f.cached(poolA, fenced("net"), namespace(ns, "tenant", "a")) }, want: allowed()},
		{name: "namespace not selected", obj: eip("e", "net", ""),
			setup: func(f *fixture) { f.cached(poolA, fenced("net"), namespace(ns, "tenant", "b")) },
			want:  refusedFor("spec.externalNetwork", "net")},
		{name: "unlabelled namespace", obj: eip("e", "net", ""),
			setup: func(f *fixture) { f.cached(poolA, fenced("net"), namespace(ns)) },
			want:  refusedFor("spec.externalNetwork", "net")},
		{name: "namespace not yet in the cache, selected", obj: eip("e", "net", ""),
			setup: func(f *fixture) { f.cached(poolA, fenced("net")); f.live(namespace(ns, "tenant", "a")) },
			want:  allowed()},
		{name: "namespace not yet in the cache, not selected", obj: eip("e", "net", ""),
			setup: func(f *fixture) { f.cached(poolA, fenced("net")); f.live(namespace(ns, "tenant", "b")) },
			want:  refusedFor("spec.externalNetwork", "net")},
		{name: "namespace nowhere: not judged on a guess", obj: eip("e", "net", ""),
			setup: func(f *fixture) { f.cached(poolA, fenced("net")) },
			want:  unjudged(`namespace "` + ns + `" does not exist`)},
		{name: "network not yet in the cache", obj: eip("e", "fresh", ""),
			setup: func(f *fixture) { f.cached(poolA, namespace(ns)); f.live(fenced("fresh")) },
			want:  refusedFor("spec.externalNetwork", "fresh")},
		{name: "invalid selector admits nobody", obj: eip("e", "net", ""),
			setup: func(f *fixture) {
				f.cached(poolA, namespace(ns, "tenant", "a"), selecting(network("net", arp, "a"), &metav1.LabelSelector{
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tenant", Operator: "Near", Values: []string{"a"}}}}))
			},
			want: invalid("spec.externalNetwork", "spec.namespaceSelector is invalid, so it admits no namespace")},
		// Refused before the pools are looked at: the tenant learns nothing of them.
		{name: "refused before requestedIP is checked", obj: eip("e", "net", "10.225.51.7"),
			setup: func(f *fixture) {
				f.cached(poolA, fenced("net"), namespace(ns, "tenant", "b"))
				f.live(claim("10.225.51.7", "a", "other-ns", "holder", "uid-holder"))
			},
			want: refusedFor("spec.externalNetwork", "net")},
		{name: "an ElasticIP that exists may still change", op: admissionv1.Update,
			setup: func(f *fixture) { f.cached(poolA, fenced("net"), namespace(ns, "tenant", "b")) },
			obj:   withBandwidth(eip("e", "net", ""), 100), old: eip("e", "net", ""), want: allowed()},
		{name: "and be deleted", op: admissionv1.Delete, old: eip("e", "net", ""),
			setup: func(f *fixture) { f.cached(poolA, fenced("net"), namespace(ns, "tenant", "b")) }, want: allowed()},
	})
}

// The refusal names the network, the namespace and the selector, and nothing of another
// namespace: not the pools, not the reservations of others.
func TestTenancyRefusalNamesNothingElse(t *testing.T) {
	f := newFixture(t)
	f.cached(pool("a", arp, "10.225.51.0/24"), fenced("net"), namespace(ns, "tenant", "b"), namespace("other-ns", "tenant", "a"))
	f.live(claim("10.225.51.7", "a", "other-ns", "holder", "uid-holder"))
	resp := f.review(admissionv1.Create, eip("e", "net", "10.225.51.7"), nil)
	refusedFor("spec.externalNetwork", "net").check(t, resp)
	for _, never := range []string{"other-ns", "holder", "10.225.51.7\"", "AddressPool", "AllocationClaim"} {
		if strings.Contains(resp.Result.Message, never) {
			t.Errorf("the refusal names %q:\n%s", never, resp.Result.Message)
		}
	}
}

func TestExternalNetworkNamespaceSelector(t *testing.T) {
	poolA := func(f *fixture) { f.cached(pool("a", arp, "10.225.51.0/24")) }
	runRuleCases(t, []ruleCase{
		{name: "a selector", setup: poolA, obj: fenced("net"), want: allowed()},
		{name: "an invalid selector", setup: poolA,
			obj: selecting(network("net", arp, "a"), &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tenant", Operator: metav1.LabelSelectorOpIn}}}),
			want: invalid("spec.namespaceSelector.matchExpressions[0].values")},
		{name: "the selector may change", op: admissionv1.Update, setup: poolA,
			obj: selecting(network("net", arp, "a"), &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "b"}}),
			old: fenced("net"), want: allowed()},
		{name: "and go", op: admissionv1.Update, setup: poolA, obj: network("net", arp, "a"), old: fenced("net"), want: allowed()},
	})
}

func withEIP(net string, kv ...string) map[string]string {
	m := map[string]string{v1alpha1.AnnotationPodWithEIP: "true"}
	if net != "" {
		m[v1alpha1.AnnotationEIPExternalNetwork] = net
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func TestPodTenancy(t *testing.T) {
	const (
		netPath     = "metadata.annotations[juneau.loutres.me/eip-external-network]"
		withPath    = "metadata.annotations[juneau.loutres.me/pod-with-eip]"
		aliasPath   = "metadata.annotations[network.alibabacloud.com/pod-with-eip]"
		defaultNote = `it is the default network (annotated juneau.loutres.me/default-network: "true")`
	)
	other := func(f *fixture) { f.cached(pool("a", arp, "10.225.51.0/24"), namespace(ns, "tenant", "b")) }
	runRuleCases(t, []ruleCase{
		{name: "named network admits", obj: pod("web", withEIP("net")),
			setup: func(f *fixture) { f.cached(fenced("net"), namespace(ns, "tenant", "a")) }, want: allowed()},
		{name: "named network does not admit", obj: pod("web", withEIP("net")),
			setup: func(f *fixture) { other(f); f.cached(fenced("net")) }, want: refusedFor(netPath, "net")},
		{name: "named network not yet in the cache", obj: pod("web", withEIP("net")),
			setup: func(f *fixture) { other(f); f.live(fenced("net")) }, want: refusedFor(netPath, "net")},
		{name: "named network missing: the controller waits for it", obj: pod("web", withEIP("net")),
			setup: other, want: allowed()},
		{name: "named network open, the default fenced", obj: pod("web", withEIP("open")),
			setup: func(f *fixture) { other(f); f.cached(network("open", arp, "a"), asDefault(fenced("net"))) }, want: allowed()},
		{name: "default network does not admit", obj: pod("web", withEIP("")),
			setup: func(f *fixture) { other(f); f.cached(asDefault(fenced("net"))) },
			want:  invalid(withPath, `ExternalNetwork "net" does not admit namespace "`+ns+`"`, defaultNote)},
		{name: "default network, managed-cloud key", obj: pod("web", map[string]string{v1alpha1.AliasPodWithEIP: "true"}),
			setup: func(f *fixture) { other(f); f.cached(asDefault(fenced("net"))) },
			want:  invalid(aliasPath, `does not admit namespace "`+ns+`"`, defaultNote)},
		{name: "default network admits", obj: pod("web", withEIP("")),
			setup: func(f *fixture) { f.cached(asDefault(fenced("net")), namespace(ns, "tenant", "a")) }, want: allowed()},
		{name: "two defaults: the controller tells the Pod", obj: pod("web", withEIP("")),
			setup: func(f *fixture) { other(f); f.cached(asDefault(fenced("net")), asDefault(fenced("net2"))) }, want: allowed()},
		{name: "pod-with-eip false asks for nothing", obj: pod("web", map[string]string{
			v1alpha1.AnnotationPodWithEIP: "false", v1alpha1.AnnotationEIPExternalNetwork: "net"}),
			setup: func(f *fixture) { other(f); f.cached(fenced("net")) }, want: allowed()},
		// An existing ElasticIP was checked when it was made; the Pod allocates nothing.
		{name: "pod-eip-name allocates nothing", obj: pod("web", map[string]string{
			v1alpha1.AnnotationPodEIPName: "mine", v1alpha1.AnnotationEIPExternalNetwork: "net"}),
			setup: func(f *fixture) { other(f); f.cached(fenced("net")) }, want: allowed()},
		{name: "update asking for the first time", op: admissionv1.Update,
			setup: func(f *fixture) { other(f); f.cached(fenced("net")) },
			obj:   pod("web", withEIP("net")), old: pod("web", map[string]string{v1alpha1.AnnotationEIPBandwidth: "10"}),
			want: refusedFor(netPath, "net")},
		{name: "update naming another network", op: admissionv1.Update,
			setup: func(f *fixture) { other(f); f.cached(fenced("net"), network("open", arp, "a")) },
			obj:   pod("web", withEIP("net")), old: pod("web", withEIP("open")), want: refusedFor(netPath, "net")},
		// The namespace was relabelled after the Pod was admitted: the Pod may still be
		// annotated; the controller says what happens to its ElasticIP.
		{name: "update leaving the request as it was", op: admissionv1.Update,
			setup: func(f *fixture) { other(f); f.cached(fenced("net")) },
			obj:   pod("web", withEIP("net", v1alpha1.AnnotationEIPBandwidth, "20")), old: pod("web", withEIP("net")), want: allowed()},
	})
}
