package agent

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/cached"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// TestSameButVersion: a Node's heartbeat (its conditions, trimmed away by the agent's
// cache) is no change; a label, an address, another type or a missing object is.
func TestSameButVersion(t *testing.T) {
	node := func(rv, label, addr string, heartbeat time.Time) any {
		obj, _ := cached.Node(&corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: rv, Labels: map[string]string{"zone": label},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Time: &metav1.Time{Time: heartbeat}}}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, LastHeartbeatTime: metav1.NewTime(heartbeat)}}},
		})
		return obj
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	base := node("1", "a", "10.0.0.1", t0)
	var nilNode *corev1.Node
	for _, c := range []struct {
		what string
		cur  any
		want bool
	}{
		{"a heartbeat", node("2", "a", "10.0.0.1", t0.Add(10*time.Second)), true},
		{"a relist of the same version", node("1", "a", "10.0.0.1", t0), true},
		{"a label", node("2", "b", "10.0.0.1", t0), false},
		{"an address", node("2", "a", "10.0.0.2", t0), false},
		{"another type", &v1alpha1.ARPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, false},
		{"a nil object", nilNode, false},
	} {
		if got := sameButVersion(base, c.cur); got != c.want {
			t.Errorf("%s: sameButVersion = %v, want %v", c.what, got, c.want)
		}
	}
	// Comparing copies leaves the cached objects as they were.
	if base.(*corev1.Node).ResourceVersion != "1" {
		t.Errorf("the compared object lost its resourceVersion")
	}
}

// TestEchoes: an update showing exactly what the agent wrote is an echo, once, whether
// it comes after the write returned or during the sync that wrote it; another version,
// or another object of the same version, needs a sync; a write whose echo never came is
// forgotten after echoMemory.
func TestEchoes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ad := func(name, rv string) *v1alpha1.ARPAdvertisement {
		return &v1alpha1.ARPAdvertisement{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
	}
	var e echoes

	// Written, then the event: an echo, once.
	e.begin()
	e.wrote(ad("a", "10"), t0)
	if wake, n := e.end(t0); wake || n != 0 {
		t.Fatalf("end of a sync without events = %v, %d", wake, n)
	}
	if got := e.event(ad("a", "10")); got != echoed {
		t.Errorf("the echo after the write returned: %v, want echoed", got)
	}
	if got := e.event(ad("a", "10")); got != news {
		t.Errorf("the same version again: %v, want news (each write matches once)", got)
	}
	if got := e.event(ad("a", "11")); got != news {
		t.Errorf("someone else's version: %v, want news", got)
	}

	// The event before the write's response: held, then matched at the end.
	e.begin()
	if got := e.event(ad("b", "20")); got != held {
		t.Errorf("an event during a sync: %v, want held", got)
	}
	e.wrote(ad("b", "20"), t0)
	if wake, n := e.end(t0); wake || n != 1 {
		t.Errorf("end after the echo came first = wake %v, %d echoes; want false, 1", wake, n)
	}

	// Another object's event during a sync wakes the loop at its end.
	e.begin()
	e.event(ad("c", "30"))
	e.wrote(ad("b", "30"), t0)
	if wake, _ := e.end(t0); !wake {
		t.Errorf("end after another object's event: no wake")
	}
	if got := e.event(ad("b", "30")); got != echoed {
		t.Errorf("b's echo after the sync: %v, want echoed", got)
	}

	// Forgotten after echoMemory.
	e.begin()
	e.wrote(ad("d", "40"), t0)
	e.end(t0.Add(echoMemory + time.Second))
	if got := e.event(ad("d", "40")); got != news {
		t.Errorf("an event after echoMemory: %v, want news", got)
	}
	if len(e.written) != 0 {
		t.Errorf("%d writes remembered, want none", len(e.written))
	}
	// No version, nothing remembered.
	e.wrote(ad("e", ""), t0)
	if len(e.written) != 0 {
		t.Errorf("a write without resourceVersion was remembered")
	}
}
