package webhookreplicas

import (
	"bytes"
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
)

func replica(name, ip string, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "juneau-system", UID: types.UID("uid-" + name),
			Labels: map[string]string{"app.kubernetes.io/component": "webhook"}},
		Spec:   corev1.PodSpec{NodeName: "node-" + name},
		Status: corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

func TestDecide(t *testing.T) {
	a, b, c := replica("a", "10.244.1.2", true), replica("b", "10.244.2.2", true), replica("c", "10.244.3.2", true)
	misses := map[types.UID]int{}
	var dead []*corev1.Pod
	for round := 1; round <= 2; round++ {
		misses, dead = Decide(misses, []*corev1.Pod{a, b, c}, map[types.UID]bool{a.UID: true, b.UID: true}, 3)
		if len(dead) != 0 || misses[c.UID] != round {
			t.Fatalf("round %d: dead %v, misses %v", round, dead, misses)
		}
	}
	next, dead := Decide(misses, []*corev1.Pod{a, b, c}, map[types.UID]bool{a.UID: true}, 3)
	if len(dead) != 1 || dead[0] != c || next[b.UID] != 1 {
		t.Errorf("third miss of c, first of b: dead %v, misses %v; want c deleted", dead, next)
	}
	// Nobody answers: the controller's own network is suspect; nothing is deleted.
	if _, dead := Decide(map[types.UID]int{a.UID: 5, b.UID: 5}, []*corev1.Pod{a, b}, map[types.UID]bool{}, 3); len(dead) != 0 {
		t.Errorf("no replica answered and %v were deleted", dead)
	}
	// An answer forgets the misses; a replica gone is forgotten.
	if next, _ := Decide(map[types.UID]int{a.UID: 2, "gone": 2}, []*corev1.Pod{a}, map[types.UID]bool{a.UID: true}, 3); len(next) != 0 {
		t.Errorf("misses after answers: %v", next)
	}
}

func TestProbed(t *testing.T) {
	deleting := replica("d", "10.244.1.3", true)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	for _, c := range []struct {
		pod  *corev1.Pod
		want bool
	}{
		{replica("a", "10.244.1.2", true), true},
		{replica("b", "10.244.1.2", false), false},
		{replica("c", "", true), false},
		{deleting, false},
	} {
		if got := Probed(c.pod); got != c.want {
			t.Errorf("Probed(%s) = %v, want %v", c.pod.Name, got, c.want)
		}
	}
}

// TestRoundDeletesTheUnreachable: of three Ready replicas, the one whose address does
// not answer is deleted at its third round, with an Event; the others stay; a replica
// not Ready is not probed.
func TestRoundDeletesTheUnreachable(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pods := []*corev1.Pod{replica("a", "10.244.1.2", true), replica("b", "10.244.2.2", true), replica("c", "10.244.3.2", true),
		replica("starting", "10.244.1.9", false)}
	kube := fake.NewClientset(pods[0], pods[1], pods[2], pods[3])
	factory := kubeinformers.NewSharedInformerFactory(kube, 0)
	recorder := record.NewFakeRecorder(10)
	var mu sync.Mutex
	var dialed []string
	c := NewController(kube, factory.Core().V1().Pods(), recorder, Options{
		Namespace: "juneau-system", Selector: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/component": "webhook"}),
		Port: 9443, Interval: 10 * time.Millisecond, Failures: 3,
		Probe: func(_ context.Context, address string) error {
			mu.Lock()
			dialed = append(dialed, address)
			mu.Unlock()
			if strings.HasPrefix(address, "10.244.3.2:") {
				return errors.New("i/o timeout")
			}
			return nil
		},
	})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	for round := 1; round <= 3; round++ {
		c.Round(ctx)
		_, err := kube.CoreV1().Pods("juneau-system").Get(ctx, "c", metav1.GetOptions{})
		if gone := apierrors.IsNotFound(err); gone != (round == 3) {
			t.Fatalf("after round %d: replica c deleted %v (%v)", round, gone, err)
		}
	}
	for _, name := range []string{"a", "b", "starting"} {
		if _, err := kube.CoreV1().Pods("juneau-system").Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("replica %s: %v", name, err)
		}
	}
	for _, d := range dialed {
		if strings.HasPrefix(d, "10.244.1.9:") {
			t.Errorf("a replica not Ready was probed: %s", d)
		}
	}
	select {
	case ev := <-recorder.Events:
		if !strings.Contains(ev, "WebhookReplicaUnreachable") || !strings.Contains(ev, `Node "node-c"`) {
			t.Errorf("event %q", ev)
		}
	default:
		t.Error("no Event for the deleted replica")
	}
}

// TestHealthzProbe: against a TLS server the probe succeeds, twice, and the server
// logs nothing (a bare TCP dial would leave "TLS handshake error" lines in the
// webhook's log). A replica too busy to answer in time passes too, whether it is stuck
// in the handler or has not even taken the connection off its listener (the kernel
// accepted it); a port nothing listens on fails.
func TestHealthzProbe(t *testing.T) {
	var served atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			served.Add(1)
		}
	}))
	var logged bytes.Buffer
	srv.Config.ErrorLog = log.New(&logged, "", 0)
	srv.StartTLS()
	defer srv.Close()
	probe := HealthzProbe()
	probeIn := func(timeout time.Duration, address string) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return probe(ctx, address)
	}
	for i := 0; i < 2; i++ {
		if err := probeIn(5*time.Second, srv.Listener.Addr().String()); err != nil {
			t.Fatalf("probe %d: %v", i, err)
		}
	}
	if served.Load() != 2 {
		t.Errorf("/healthz served %d times, want 2", served.Load())
	}

	hung := make(chan struct{})
	slow := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hung }))
	defer slow.Close()
	defer close(hung)
	if err := probeIn(200*time.Millisecond, slow.Listener.Addr().String()); err != nil {
		t.Errorf("a replica stuck answering failed the probe: %v", err)
	}
	// A listener nobody accepts from: the kernel completes the connection, the TLS
	// handshake never starts.
	backlog, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer backlog.Close()
	if err := probeIn(200*time.Millisecond, backlog.Addr().String()); err != nil {
		t.Errorf("a replica that has not taken the connection yet failed the probe: %v", err)
	}
	closed := backlog.Addr().String()
	backlog.Close()
	if err := probeIn(200*time.Millisecond, closed); err == nil {
		t.Error("a port nothing listens on passed the probe")
	}
	srv.Close()
	if logged.Len() > 0 {
		t.Errorf("the server logged: %s", logged.String())
	}
}
