package cni

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/node/cniserver"
)

func nicsOf(iface, addr string) []cniserver.Interface {
	return []cniserver.Interface{{Interface: iface, ElasticIP: iface + "-eip", Holds: true, Address: addr}}
}

// scriptedAgent answers from a list of replies, repeating the last one.
type scriptedAgent struct {
	mu      sync.Mutex
	replies []reply
	calls   int
	asked   []string
}

type reply struct {
	nics []cniserver.Interface
	err  error
}

func (a *scriptedAgent) Interfaces(_ context.Context, ns, pod string, uid types.UID) ([]cniserver.Interface, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, ns+"/"+pod+"/"+string(uid))
	r := a.replies[min(a.calls, len(a.replies)-1)]
	a.calls++
	return r.nics, r.err
}

var webPod = podRef{Namespace: "ns1", Name: "web", UID: "u1"}

func waiting(msg string) []cniserver.Interface {
	return []cniserver.Interface{{Interface: "eth0", ElasticIP: "web-eip", Waiting: msg}}
}

func TestWaitReturnsHoldingNICs(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	a := &scriptedAgent{replies: []reply{{nics: append(nicsOf("ext0", "10.225.51.7/32"), nicsOf("eth0", "10.225.51.6/32")...)}}}
	nics, err := waitForInterfaces(ctx, a, webPod, time.Second)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	if len(nics) != 2 || nics[0].Interface != "eth0" || nics[1].Interface != "ext0" {
		t.Errorf("nics = %+v, want eth0 then ext0", nics)
	}
	if a.calls != 1 || a.asked[0] != "ns1/web/u1" {
		t.Errorf("agent asked %v", a.asked)
	}
}

func TestWaitNoNICs(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	nics, err := waitForInterfaces(ctx, &scriptedAgent{replies: []reply{{}}}, webPod, time.Second)
	if err != nil || len(nics) != 0 {
		t.Errorf("wait = %v, %v; want no NICs", nics, err)
	}
}

func TestWaitUntilHolding(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	a := &scriptedAgent{replies: []reply{
		{err: &cniserver.StatusError{Status: http.StatusNotFound, Message: "pod not known"}},
		{nics: waiting(`ElasticIP "web-eip" is used by NetworkInterface "old.eth0"`)},
		{nics: nicsOf("eth0", "10.225.51.6/32")},
	}}
	nics, err := waitForInterfaces(ctx, a, webPod, 10*time.Second)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	if len(nics) != 1 || !nics[0].Holds || a.calls != 3 {
		t.Errorf("nics = %+v after %d calls, want the holding NIC after 3", nics, a.calls)
	}
}

func TestWaitTimesOutNamingTheHolder(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	a := &scriptedAgent{replies: []reply{{nics: waiting(`ElasticIP "web-eip" is used by NetworkInterface "old.eth0"`)}}}
	_, err := waitForInterfaces(ctx, a, webPod, 500*time.Millisecond)
	var nh *notHeldError
	if !errors.As(err, &nh) {
		t.Fatalf("err = %v, want notHeldError", err)
	}
	// The configured bound, not the time measured: the message is the same at every try.
	for _, want := range []string{`Pod "ns1/web" did not get its ElasticIPs within 500ms: `, `eth0: ElasticIP "web-eip" is used by NetworkInterface "old.eth0"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if a.calls < 2 {
		t.Errorf("asked %d times within the wait, want several", a.calls)
	}
}

func TestNotHeldWithoutExplanation(t *testing.T) {
	err := &notHeldError{pod: webPod, within: time.Second, pending: []cniserver.Interface{
		{Interface: "eth0", ElasticIP: "web-eip"}, {Interface: "ext0", ElasticIP: "gw-eip", Waiting: "x"}}}
	want := `Pod "ns1/web" did not get its ElasticIPs within 1s: eth0: NetworkInterface "web.eth0" does not hold ElasticIP "web-eip"; ext0: x`
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}

func TestWaitZeroAsksOnce(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	a := &scriptedAgent{replies: []reply{{nics: waiting("x")}}}
	if _, err := waitForInterfaces(ctx, a, webPod, 0); err == nil {
		t.Fatal("no error")
	}
	if a.calls != 1 {
		t.Errorf("asked %d times, want 1", a.calls)
	}
}

func TestWaitAgentErrors(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	down := errors.New("dial unix /run/juneau/cni.sock: connect: no such file or directory")
	a := &scriptedAgent{replies: []reply{{err: down}}}
	_, err := waitForInterfaces(ctx, a, webPod, 500*time.Millisecond)
	var ae *agentError
	if !errors.As(err, &ae) || !errors.Is(err, down) || a.calls < 2 ||
		!strings.HasPrefix(err.Error(), `Pod "ns1/web": the node agent could not tell its direct NICs within 500ms: dial unix`) {
		t.Errorf("err = %v after %d calls, want the agent error after retries, within the bound", err, a.calls)
	}

	bad := &scriptedAgent{replies: []reply{{err: &cniserver.StatusError{Status: http.StatusBadRequest, Message: "bad"}}}}
	_, err = waitForInterfaces(ctx, bad, webPod, 5*time.Second)
	if !errors.As(err, &ae) || bad.calls != 1 || strings.Contains(err.Error(), "within") {
		t.Errorf("400: err = %v after %d calls, want an immediate failure (not said to be after a wait)", err, bad.calls)
	}
}
