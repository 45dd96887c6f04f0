package wiring

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/loutres/juneau/test/heap"
)

// TestEveryKindIsDeclaredOnce: kinds fill every cache of the agent (agent.Listers), one
// informer a kind, and the tests know each kind.
func TestEveryKindIsDeclaredOnce(t *testing.T) {
	cs := newClients(t, false)
	c := newCaches(cs.kube, cs.juneau, nodeName)
	l := reflect.ValueOf(c.listers)
	for i := range l.NumField() {
		if l.Field(i).IsNil() {
			t.Errorf("agent.Listers.%s is filled by no kind", l.Type().Field(i).Name)
		}
	}
	if len(c.informers) != len(kinds) {
		t.Fatalf("%d informers for %d kinds", len(c.informers), len(kinds))
	}
	seen := map[cache.SharedIndexInformer]string{}
	var declared []string
	for i, k := range kinds {
		if other, ok := seen[c.informers[i]]; ok {
			t.Errorf("kinds %s and %s share an informer", other, k.name)
		}
		seen[c.informers[i]] = k.name
		declared = append(declared, k.name)
	}
	slices.Sort(declared)
	if !slices.Equal(declared, kindNames()) {
		t.Errorf("kinds %v, the tests know %v", declared, kindNames())
	}
	if d := c.direct; d.Pods != c.listers.Pods || d.NICs != c.listers.NICs || d.ElasticIPs != c.listers.ElasticIPs {
		t.Error("the CNI server's source reads other caches than the agent's")
	}
}

// TestEveryKindIsCachedAndSynced: once started, every kind's informer syncs, the CNI
// server's source says so, the kinds of this Node alone are listed and watched with
// the field selector spec.nodeName=<Node>, attachments and ElasticIPs are cached
// trimmed (the attachments' condition types interned) and no object keeps its
// managedFields.
func TestEveryKindIsCachedAndSynced(t *testing.T) {
	cs := newClients(t, true)
	c := newCaches(cs.kube, cs.juneau, nodeName)
	if c.direct.Synced() {
		t.Error("the CNI server's source is synced before the informers start")
	}
	ctx := start(t, c, nil)
	for i, k := range kinds {
		eventually(t, ctx, k.name+" informer synced", c.informers[i].HasSynced)
	}
	if !c.direct.Synced() {
		t.Error("the CNI server's source is not synced once every informer is")
	}

	restrictions := map[string][]string{}
	for _, a := range slices.Concat(cs.kube.Actions(), cs.juneau.Actions()) {
		switch a := a.(type) {
		case clienttesting.ListAction:
			restrictions[a.GetResource().Resource] = append(restrictions[a.GetResource().Resource], "list "+a.GetListRestrictions().Fields.String())
		case clienttesting.WatchAction:
			restrictions[a.GetResource().Resource] = append(restrictions[a.GetResource().Resource], "watch "+a.GetWatchRestrictions().Fields.String())
		}
	}
	for _, name := range kindNames() {
		w := watched[name]
		selector := ""
		if w.onNode {
			selector = "spec.nodeName=" + nodeName
		}
		want := []string{"list " + selector, "watch " + selector}
		if got := restrictions[w.resource]; !slices.Equal(got, want) {
			t.Errorf("%s: the API server was asked %q, want %q", name, got, want)
		}
	}

	for i, k := range kinds {
		for _, obj := range c.informers[i].GetStore().List() {
			if m, err := meta.Accessor(obj); err != nil || m.GetManagedFields() != nil {
				t.Errorf("%s %v cached with its managedFields (%v)", k.name, obj, err)
			}
		}
	}
	for _, name := range []string{"v4", "v6"} {
		a, err := c.listers.Attachments.ElasticIPAttachments("default").Get(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Annotations) != 0 || a.Status.ElasticIP == "" {
			t.Errorf("attachment %s cached untrimmed or emptied: annotations %v, status %+v", name, a.Annotations, a.Status)
		}
		if len(a.Status.Conditions) == 0 {
			t.Errorf("attachment %s cached without its conditions", name)
		}
		for _, cond := range a.Status.Conditions {
			if !heap.Interned(cond.Type) {
				t.Errorf("attachment %s cached with its condition type %q not interned", name, cond.Type)
			}
		}
		e, err := c.listers.ElasticIPs.ElasticIPs("default").Get(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Labels) != 0 || len(e.Annotations) != 0 || e.Status.Conditions != nil || e.Status.Address == "" {
			t.Errorf("ElasticIP %s cached untrimmed or emptied: labels %v, annotations %v, status %+v", name, e.Labels, e.Annotations, e.Status)
		}
	}
}

// TestInputsOfBothFamilies: the agent's inputs hold the IPv4 and the IPv6 objects of
// every kind from the caches.
func TestInputsOfBothFamilies(t *testing.T) {
	cs := newClients(t, true)
	c := newCaches(cs.kube, cs.juneau, nodeName)
	a := standbyAgent(t, c, &responder{}, &responder{})
	ctx := start(t, c, nil)
	for i, k := range kinds {
		eventually(t, ctx, k.name+" informer synced", c.informers[i].HasSynced)
	}
	in, err := a.Inputs()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range kindNames() {
		if got, want := watched[name].inputs(in), []string{"v4", "v6"}; !slices.Equal(got, want) {
			t.Errorf("%s: the inputs hold %v, want %v", name, got, want)
		}
	}
}

// TestStandbyAnswersBothFamilies: running, the agent answers ARP for the IPv4
// ElasticIP and NDP for the IPv6 one that its caches attach on this Node.
func TestStandbyAnswersBothFamilies(t *testing.T) {
	cs := newClients(t, true)
	c := newCaches(cs.kube, cs.juneau, nodeName)
	arp, ndp := &responder{}, &responder{}
	ctx := start(t, c, standbyAgent(t, c, arp, ndp))
	for _, r := range []struct {
		what      string
		responder *responder
		want      netip.Addr
	}{{"ARP", arp, netip.MustParseAddr(eip4)}, {"NDP", ndp, netip.MustParseAddr(eip6)}} {
		eventually(t, ctx, fmt.Sprintf("%s answers for %s", r.what, r.want), func() bool {
			addrs, _ := r.responder.answers()
			return slices.Equal(addrs, []netip.Addr{r.want})
		})
	}
}

// TestEventOfEveryKindTriggersSync: an object of any kind appearing makes the agent
// sync. The agent stands by and the clients start empty, so that nothing else does.
func TestEventOfEveryKindTriggersSync(t *testing.T) {
	cs := newClients(t, false)
	c := newCaches(cs.kube, cs.juneau, nodeName)
	arp := &responder{}
	ctx := start(t, c, standbyAgent(t, c, arp, &responder{}))
	syncs := func() int { _, n := arp.answers(); return n }
	eventually(t, ctx, "the first sync", func() bool { return syncs() > 0 })
	for _, name := range kindNames() {
		before := syncs()
		cs.add(t, watched[name].object("event", false))
		eventually(t, ctx, "a sync after a new "+name, func() bool { return syncs() > before })
	}
}
