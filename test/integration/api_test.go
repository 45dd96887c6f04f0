package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/framework"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestKubectlIsTheBuiltOne(t *testing.T) {
	cp := framework.Shared(t)
	r := cp.Kubectl(testContext(t), "", "version", "--client")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if !strings.Contains(r.Stdout, "Client Version: "+framework.KubernetesVersion) {
		t.Fatalf("kubectl version = %q, want client %s", r.Stdout, framework.KubernetesVersion)
	}
	r = cp.Kubectl(testContext(t), "", "version")
	if r.Err != nil || !strings.Contains(r.Stdout, "Server Version: "+framework.KubernetesVersion) {
		t.Fatalf("server version: %q %v", r.Stdout, r.Err)
	}
}

// TestExamplesApply applies every example manifest, the user-facing ones and the
// reference shapes of the controller-made kinds, and reads each kind back.
func TestExamplesApply(t *testing.T) {
	cp := framework.Shared(t)
	ctx := testContext(t)
	ns := cp.NewNamespace(t, "examples")
	examples := filepath.Join(cp.RepoRoot, "manifests", "examples")
	for _, dir := range []string{examples, filepath.Join(examples, "ipv6"), filepath.Join(examples, "reference")} {
		if r := cp.Kubectl(ctx, "", "apply", "-n", ns, "-f", dir); r.Err != nil {
			t.Fatalf("applying %s: %v", dir, r.Err)
		}
	}
	want := map[string][]string{
		"addresspool":         {"ext-pool", "ext-pool6"},
		"externalnetwork":     {"ext-net"},
		"elasticip":           {"nginx-eip", "web-eip", "nginx-eip6", "web6-eip"},
		"elasticipattachment": {"nginx-eip-attach", "nginx-eip6-attach"},
		"networkinterface":    {"web.eth0"},
		"allocationclaim":     {"10.225.51.5"},
		"arpadvertisement":    {"eip-default-nginx-eip"},
		"pod":                 {"nginx", "web", "web6"},
	}
	for kind, names := range want {
		r := cp.Kubectl(ctx, "", "get", kind, "-n", ns, "-o", "name")
		if r.Err != nil {
			t.Fatalf("get %s: %v", kind, r.Err)
		}
		for _, name := range names {
			if !strings.Contains(r.Stdout, "/"+name+"\n") {
				t.Errorf("kubectl get %s: %q lacks %s", kind, r.Stdout, name)
			}
		}
	}
	// Node agents watch only their own objects through field selectors.
	for _, sel := range []struct{ kind, field string }{
		{"networkinterface", "spec.nodeName"}, {"arpadvertisement", "spec.nodeName"}, {"elasticipattachment", "status.nodeName"},
	} {
		r := cp.Kubectl(ctx, "", "get", sel.kind, "-n", ns, "-o", "name", "--field-selector", sel.field+"=node-b")
		if r.Err != nil || strings.TrimSpace(r.Stdout) != "" {
			t.Errorf("%s with %s=node-b: %q %v, want nothing", sel.kind, sel.field, r.Stdout, r.Err)
		}
	}
	if r := cp.Kubectl(ctx, "", "get", "networkinterface", "-n", ns, "-o", "name", "--field-selector", "spec.nodeName=node-a"); r.Err != nil || !strings.Contains(r.Stdout, "web.eth0") {
		t.Errorf("networkinterface with spec.nodeName=node-a: %q %v", r.Stdout, r.Err)
	}
	// Short names resolve.
	for _, short := range []string{"eip", "eipa", "nic", "arpad", "pool", "extnet", "claim"} {
		if r := cp.Kubectl(ctx, "", "get", short, "-n", ns); r.Err != nil {
			t.Errorf("short name %s: %v", short, r.Err)
		}
	}
}

// TestSchemaRejections checks what the CRD schemas refuse on their own, without the webhook.
func TestSchemaRejections(t *testing.T) {
	cp := framework.Shared(t)
	ns := cp.NewNamespace(t, "schema")
	cases := []struct {
		name     string
		manifest string
		want     []string
	}{
		{
			name: "bad enum",
			manifest: `apiVersion: juneau.loutres.me/v1alpha1
kind: AddressPool
metadata: {name: bad-enum}
spec: {advertiseMode: ospf, addresses: [10.225.52.0/24]}`,
			want: []string{`spec.advertiseMode`, `Unsupported value: "ospf"`, `"arp"`, `"bgp"`},
		},
		{
			name: "community out of range",
			manifest: `apiVersion: juneau.loutres.me/v1alpha1
kind: AddressPool
metadata: {name: bad-community}
spec: {advertiseMode: bgp, addresses: [10.225.52.0/24], bgpCommunities: ["65000:100", "65536:1"]}`,
			want: []string{`spec.bgpCommunities`, `a standard community has two numbers of 0 to 65535`},
		},
		{
			name: "community not a community",
			manifest: `apiVersion: juneau.loutres.me/v1alpha1
kind: AddressPool
metadata: {name: bad-community}
spec: {advertiseMode: bgp, addresses: [10.225.52.0/24], bgpCommunities: ["no-export"]}`,
			want: []string{`spec.bgpCommunities[0]`, `should match`},
		},
		{
			name: "communities on an arp pool",
			manifest: `apiVersion: juneau.loutres.me/v1alpha1
kind: AddressPool
metadata: {name: arp-community}
spec: {advertiseMode: arp, addresses: [10.225.52.0/24], bgpCommunities: ["65000:100"]}`,
			want: []string{`bgpCommunities applies to pools of advertiseMode bgp only`},
		},
		{
			name: "missing required externalNetwork",
			manifest: `apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIP
metadata: {name: no-network}
spec: {requestedIP: 10.225.51.7}`,
			want: []string{`spec.externalNetwork`, `Required value`},
		},
		{
			name: "empty addresses",
			manifest: `apiVersion: juneau.loutres.me/v1alpha1
kind: AddressPool
metadata: {name: empty}
spec: {advertiseMode: arp, addresses: []}`,
			want: []string{`spec.addresses`, `should have at least 1 items`},
		},
		{
			name: "bandwidth out of range",
			manifest: `apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIP
metadata: {name: too-fast}
spec: {externalNetwork: ext-net, bandwidthMbps: 100001}`,
			want: []string{`spec.bandwidthMbps`, `should be less than or equal to 100000`},
		},
		{
			name: "missing targetRef",
			manifest: `apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIPAttachment
metadata: {name: no-target}
spec: {elasticIPRef: {name: nginx-eip}}`,
			want: []string{`spec.targetRef`, `Required value`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := cp.Kubectl(testContext(t), tc.manifest, "apply", "-n", ns, "-f", "-")
			if r.Err == nil {
				t.Fatalf("apply succeeded, want rejection containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Stderr, w) {
					t.Errorf("rejection %q lacks %q", r.Stderr, w)
				}
			}
		})
	}
}

// TestSchemaTransitionRules checks immutability and append-only rules carried by the CRDs.
func TestSchemaTransitionRules(t *testing.T) {
	cp := framework.Shared(t)
	ctx := testContext(t)
	ns := cp.NewNamespace(t, "transition")
	apply := func(manifest string) framework.KubectlResult {
		return cp.Kubectl(ctx, manifest, "apply", "-n", ns, "-f", "-")
	}
	pool := `apiVersion: juneau.loutres.me/v1alpha1
kind: AddressPool
metadata: {name: transition-pool}
spec: {advertiseMode: %s, addresses: [%s]}`
	if r := apply(fmt.Sprintf(pool, "arp", "10.225.60.0/24")); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := apply(fmt.Sprintf(pool, "arp", "10.225.60.0/24, 10.225.61.0/24")); r.Err != nil {
		t.Fatalf("appending an address: %v", r.Err)
	}
	for _, tc := range []struct{ manifest, want string }{
		{fmt.Sprintf(pool, "bgp", "10.225.60.0/24, 10.225.61.0/24"), "advertiseMode is immutable"},
		{fmt.Sprintf(pool, "arp", "10.225.61.0/24"), "addresses is append-only"},
	} {
		r := apply(tc.manifest)
		if r.Err == nil || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("update %q: err=%v stderr=%q, want %q", tc.manifest, r.Err, r.Stderr, tc.want)
		}
	}
	eip := `apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIP
metadata: {name: pinned}
spec: {externalNetwork: %s, requestedIP: %s}`
	if r := apply(fmt.Sprintf(eip, "ext-net", "10.225.51.9")); r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, tc := range []struct{ manifest, want string }{
		{fmt.Sprintf(eip, "other-net", "10.225.51.9"), "externalNetwork is immutable"},
		{fmt.Sprintf(eip, "ext-net", "10.225.51.10"), "requestedIP is immutable"},
	} {
		r := apply(tc.manifest)
		if r.Err == nil || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("update: err=%v stderr=%q, want %q", r.Err, r.Stderr, tc.want)
		}
	}
}

var spaces = regexp.MustCompile(`\s{2,}`)

// TestElasticIPColumns writes a status with the typed client and compares kubectl's
// table with the columns of docs/resources.md#elasticip.
func TestElasticIPColumns(t *testing.T) {
	cp := framework.Shared(t)
	ctx := testContext(t)
	ns := cp.NewNamespace(t, "columns")
	eips := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns)
	eip, err := eips.Create(ctx, &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx-eip"},
		Spec:       v1alpha1.ElasticIPSpec{ExternalNetwork: "ext-net"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eip.Status = v1alpha1.ElasticIPStatus{
		Phase:      v1alpha1.ElasticIPAttached,
		Address:    "10.225.51.5",
		Attachment: &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: "nginx-eip-attach"},
	}
	meta.SetStatusCondition(&eip.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionAllocated, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAllocated,
		Message: `address "10.225.51.5" reserved from pool "ext-pool"`, ObservedGeneration: eip.Generation,
	})
	meta.SetStatusCondition(&eip.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionAttached, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAttached,
		Message: `used by ElasticIPAttachment "nginx-eip-attach"`, ObservedGeneration: eip.Generation,
	})
	if _, err := eips.UpdateStatus(ctx, eip, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	r := cp.Kubectl(ctx, "", "get", "elasticip", "-n", ns)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("kubectl get elasticip printed %d lines, want 2:\n%s", len(lines), r.Stdout)
	}
	gotHeader := strings.Fields(lines[0])
	wantHeader := []string{"NAME", "EXTERNALNETWORK", "ADDRESS", "ATTACHMENTKIND", "ATTACHMENT", "PHASE", "ALLOCATED", "ATTACHED"}
	if strings.Join(gotHeader, " ") != strings.Join(wantHeader, " ") {
		t.Errorf("header = %q, want %q", gotHeader, wantHeader)
	}
	wantRow := "nginx-eip ext-net 10.225.51.5 ElasticIPAttachment nginx-eip-attach Attached True True"
	if got := spaces.ReplaceAllString(lines[1], " "); got != wantRow {
		t.Errorf("row = %q, want %q", got, wantRow)
	}

	r = cp.Kubectl(ctx, "", "describe", "elasticip", "-n", ns, "nginx-eip")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, want := range []string{"Conditions:", "Allocated", "Attached", "Reason:", `address "10.225.51.5" reserved from pool "ext-pool"`, `used by ElasticIPAttachment "nginx-eip-attach"`} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("describe lacks %q:\n%s", want, r.Stdout)
		}
	}
}

// TestIPv6Schema checks what the CRDs themselves say about IPv6: ipFamily defaults to
// IPv4 and is immutable, an IPv6 requestedIP and an IPv6 pool range fit, an IPv6
// AllocationClaim is stored under its mapped name, and the ADDRESS column shows an IPv6
// address as it is (docs/resources.md#elasticip).
func TestIPv6Schema(t *testing.T) {
	cp := framework.Shared(t)
	ctx := testContext(t)
	ns := cp.NewNamespace(t, "ipv6")
	apply := func(manifest string) framework.KubectlResult {
		return cp.Kubectl(ctx, manifest, "apply", "-n", ns, "-f", "-")
	}
	eips := cp.Juneau.JuneauV1alpha1().ElasticIPs(ns)

	plain, err := eips.Create(ctx, &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Name: "plain"},
		Spec:       v1alpha1.ElasticIPSpec{ExternalNetwork: "ext-net"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Spec.IPFamily != v1alpha1.IPv4 {
		t.Errorf("spec.ipFamily defaulted to %q, want IPv4", plain.Spec.IPFamily)
	}

	six := `apiVersion: juneau.loutres.me/v1alpha1
kind: ElasticIP
metadata: {name: six}
spec: {externalNetwork: ext-net, ipFamily: %s, requestedIP: '%s'}`
	if r := apply(fmt.Sprintf(six, "IPv6", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe")); r.Err != nil {
		t.Fatalf("IPv6 ElasticIP with the longest requestedIP: %v: %s", r.Err, r.Stderr)
	}
	for _, tc := range []struct{ manifest, want string }{
		{fmt.Sprintf(six, "IPv4", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"), "ipFamily is immutable"},
		{strings.Replace(fmt.Sprintf(six, "IPv5", "fd00::1"), "name: six", "name: seven", 1), `Unsupported value: "IPv5"`},
	} {
		r := apply(tc.manifest)
		if r.Err == nil || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("apply %q: err=%v stderr=%q, want %q", tc.manifest, r.Err, r.Stderr, tc.want)
		}
	}

	longest := "ffff:ffff:ffff:ffff:ffff:ffff:ffff:0-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
	pool := fmt.Sprintf(`apiVersion: juneau.loutres.me/v1alpha1
kind: AddressPool
metadata: {name: ipv6-schema-pool}
spec: {advertiseMode: arp, addresses: ['%s']}`, longest)
	if r := apply(pool); r.Err != nil {
		t.Fatalf("IPv6 pool with the longest range: %v: %s", r.Err, r.Stderr)
	}
	t.Cleanup(func() {
		_ = cp.Juneau.JuneauV1alpha1().AddressPools().Delete(context.Background(), "ipv6-schema-pool", metav1.DeleteOptions{})
	})

	claim := `apiVersion: juneau.loutres.me/v1alpha1
kind: AllocationClaim
metadata: {name: fd00-225-51--5}
spec:
  addressPool: ipv6-schema-pool
  address: 'fd00:225:51::5'
  consumer: {kind: ElasticIP, namespace: default, name: six, uid: u-6}`
	if r := apply(claim); r.Err != nil {
		t.Fatalf("IPv6 AllocationClaim: %v: %s", r.Err, r.Stderr)
	}
	t.Cleanup(func() {
		_ = cp.Juneau.JuneauV1alpha1().AllocationClaims().Delete(context.Background(), "fd00-225-51--5", metav1.DeleteOptions{})
	})

	got, err := eips.Get(ctx, "six", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Status = v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPAvailable, Address: "fd00:225:51::5"}
	if _, err := eips.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := cp.Kubectl(ctx, "", "get", "elasticip", "-n", ns, "six", "--no-headers")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if want := "six ext-net fd00:225:51::5 Available"; spaces.ReplaceAllString(strings.TrimSpace(r.Stdout), " ") != want {
		t.Errorf("row = %q, want %q", r.Stdout, want)
	}
}
