package main

import (
	"context"
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/nft"
	"github.com/loutres/juneau/test/e2e/harness"
)

// poolAddr matches an address of the pool in `nft list table` output.
var poolAddr = regexp.MustCompile(`\b10\.226\.\d+\.\d+\b`)

// checkLive asserts that the live ElasticIPs hold distinct addresses, each with exactly
// one claim naming it, and that no other claim exists.
func (s *soak) checkLive() {
	eips, _ := s.eips.ElasticIPs(s.ns).List(labels.Everything())
	claims, _ := s.claims.List(labels.Everything())
	if len(eips) != len(s.live) {
		s.r.Errorf("%d ElasticIPs exist, want %d", len(eips), len(s.live))
	}
	byAddr := map[string]*v1alpha1.AllocationClaim{}
	for _, c := range claims {
		byAddr[c.Name] = c
	}
	seen := map[string]string{}
	for _, e := range eips {
		if other, dup := seen[e.Status.Address]; dup {
			s.r.Errorf("address %q given to both %s and %s", e.Status.Address, other, e.Name)
		}
		seen[e.Status.Address] = e.Name
		if c, ok := byAddr[e.Status.Address]; !ok || c.Spec.Consumer.UID != string(e.UID) {
			s.r.Errorf("ElasticIP %s (%s) has no claim of its own", e.Name, e.Status.Address)
		}
	}
	if len(claims) != len(eips) {
		s.r.Errorf("%d claims for %d ElasticIPs", len(claims), len(eips))
	}
}

// leak is one thing that must be gone after the teardown, and how many are left.
type leak struct {
	what string
	left int
}

// checkNothingLeft asserts that the teardown left nothing, in the API and on the Nodes.
func (s *soak) checkNothingLeft(ctx context.Context) []leak {
	var leaks []leak
	count := func(what string, f func() int) {
		n := f()
		leaks = append(leaks, leak{what, n})
		if n != 0 {
			s.r.Errorf("after the teardown: %d %s left", n, what)
		}
	}
	j := s.cp.Juneau.JuneauV1alpha1()
	count("AllocationClaims", func() int {
		l, err := j.AllocationClaims().List(ctx, metav1.ListOptions{})
		if err != nil {
			s.r.Fatal(err)
		}
		return len(l.Items)
	})
	count("ARPAdvertisements", func() int {
		l, err := j.ARPAdvertisements().List(ctx, metav1.ListOptions{})
		if err != nil {
			s.r.Fatal(err)
		}
		return len(l.Items)
	})
	count("NetworkInterfaces", func() int {
		l, err := j.NetworkInterfaces(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			s.r.Fatal(err)
		}
		return len(l.Items)
	})
	for _, name := range []string{"node-a", "node-b"} {
		n := s.c.Nodes[name]
		count("pool addresses in the nftables table of "+name, func() int {
			var table string
			s.waitFor(ctx, "the table of "+name, func() (bool, string) {
				out, err := n.NS.Output("nft", "list", "table", "ip", nft.TableName)
				table = out
				return err == nil, out
			})
			return len(poolAddr.FindAllString(table, -1))
		})
		count("mappings the agent of "+name+" counts", func() int {
			text, err := n.Metrics(ctx)
			if err != nil {
				s.r.Fatal(err)
			}
			v, ok := harness.MetricValue(text, "juneau_node_nat_mappings")
			if !ok {
				s.r.Fatalf("the agent of %s exposes no juneau_node_nat_mappings", name)
			}
			return int(v)
		})
	}
	return leaks
}
