package e2e

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/netns"
)

// annotateDefault marks ext-net as the network automatic ElasticIPs come from.
func annotateDefault(t *testing.T, c *harness.Cluster) {
	t.Helper()
	if r := c.CP.Kubectl(context.Background(), "", "annotate", "externalnetwork", "ext-net", v1alpha1.AnnotationDefaultNetwork+"=true"); r.Err != nil {
		t.Fatal(r.Err)
	}
}

// downwardAPI plays the kubelet's downward API volume of metadata.annotations for the
// Pod object of that UID: it keeps a file with its annotations (one `key="value"` line
// each, sorted by key, as the kubelet writes them) up to date until the test ends. The
// kubelet refreshes such a file within its sync period; this one every 100 ms.
func downwardAPI(t *testing.T, c *harness.Cluster, ns, pod string, uid types.UID) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "annotations")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			p, err := c.CP.Kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
			if err == nil && p.UID == uid {
				var b strings.Builder
				for _, k := range slices.Sorted(maps.Keys(p.Annotations)) {
					fmt.Fprintf(&b, "%s=%s\n", k, strconv.Quote(p.Annotations[k]))
				}
				_ = os.WriteFile(path+".tmp", []byte(b.String()), 0o644)
				_ = os.Rename(path+".tmp", path)
			}
			return false, nil
		})
	}()
	return path
}

// TestAutomaticElasticIP: a Deployment-like Pod asking with pod-with-eip gets an
// ElasticIP; the annotations appear and an init container reading the downward API
// file finds the address; the readiness gate turns True only once traffic from the
// external client reaches the Pod; deleting the Pod releases the address (Follow).
func TestAutomaticElasticIP(t *testing.T) {
	c, ns := setup(t)
	annotateDefault(t, c)
	p := c.CreatePod(harness.PodSpec{Namespace: ns, Name: "web-7d9f", Node: "node-a",
		Labels: map[string]string{"app": "web"}, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f", UID: "web-rs-uid", Controller: ptr.To(true)}},
		Annotations:    map[string]string{v1alpha1.AnnotationPodWithEIP: "true"},
		ReadinessGates: []string{v1alpha1.PodConditionElasticIP}})
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	c.ServeTCP(p.NS, "web", 80)
	file := downwardAPI(t, c, ns, "web-7d9f", p.Object.UID)

	// The init container: wait until the annotation exists, then read the address.
	out := p.NS.MustRun("sh", "-c", fmt.Sprintf(`for i in $(seq 600); do grep -q '^%s=' %s 2>/dev/null && break; sleep 0.1; done; grep '^%s=' %s`,
		v1alpha1.AnnotationAllocatedEIPAddr, file, v1alpha1.AnnotationAllocatedEIPAddr, file))
	eip := strings.Trim(strings.TrimSpace(strings.SplitN(out, "=", 2)[1]), `"`)
	if net.ParseIP(eip) == nil {
		t.Fatalf("the init container read %q", out)
	}
	c.WaitGone("readiness gate True", func(context.Context) bool {
		g := gate(c, ns, "web-7d9f")
		return g != nil && g.Status == corev1.ConditionTrue
	})
	if got, err := harness.Dial(c.Client, eip, 80); err != nil || got != "web "+harness.ClientIP {
		t.Errorf("right after the gate turned True: %q %v", got, err)
	}
	pod, err := c.CP.Kube.CoreV1().Pods(ns).Get(context.Background(), "web-7d9f", metav1.GetOptions{})
	if err != nil || pod.Annotations[v1alpha1.AnnotationAllocatedEIPName] == "" {
		t.Errorf("allocated-eip-name not written back: %v %v", pod.Annotations, err)
	}

	p.Gone()
	c.WaitGone("the ElasticIP released with the Pod", func(ctx context.Context) bool {
		_, err := c.CP.Juneau.JuneauV1alpha1().AllocationClaims().Get(ctx, eip, metav1.GetOptions{})
		return err != nil
	})
}

// TestManagedCloudAnnotations: a manifest written for the managed service's keys works
// unchanged.
func TestManagedCloudAnnotations(t *testing.T) {
	c, ns := setup(t)
	ctx := testContext(t)
	annotateDefault(t, c)
	manifest := `apiVersion: v1
kind: Pod
metadata:
  name: legacy
  annotations:
    network.alibabacloud.com/pod-with-eip: "true"
    network.alibabacloud.com/eip-bandwidth: "5"
    network.alibabacloud.com/pod-eip-release-strategy: Follow
spec:
  nodeName: node-b
  containers: [{name: app, image: registry.k8s.io/pause:3.10}]
`
	if r := c.CP.Kubectl(ctx, manifest, "apply", "-n", ns, "-f", "-"); r.Err != nil {
		t.Fatal(r.Err)
	}
	p := c.AdoptPod(ns, "legacy")
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	c.ServeTCP(p.NS, "legacy", 80)
	var addr string
	c.WaitGone("the allocated address written back", func(ctx context.Context) bool {
		pod, err := c.CP.Kube.CoreV1().Pods(ns).Get(ctx, "legacy", metav1.GetOptions{})
		addr = pod.Annotations[v1alpha1.AnnotationAllocatedEIPAddr]
		return err == nil && addr != ""
	})
	c.EventuallyDial(c.Client, addr, 80, "legacy")
	name := ""
	if pod, err := c.CP.Kube.CoreV1().Pods(ns).Get(ctx, "legacy", metav1.GetOptions{}); err == nil {
		name = pod.Annotations[v1alpha1.AnnotationAllocatedEIPName]
	}
	eip, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || eip.Spec.BandwidthMbps == nil || *eip.Spec.BandwidthMbps != 5 {
		t.Errorf("ElasticIP %q from the alias keys: %+v %v", name, eip, err)
	}
}

// throughputWindow is how long throughput measures, after a one-second warmup.
const throughputWindow = 4 * time.Second

// throughput receives on a fresh TCP listener in recv for warmup+window after the
// first byte while send streams to addr, and returns Mbit/s of IP traffic (payload
// scaled by 1500/1448, the IP bytes per full segment).
func throughput(t *testing.T, send, recv *netns.NS, addr string, port int) float64 {
	t.Helper()
	const warmup, window = time.Second, throughputWindow
	var l net.Listener
	recv.MustDo(func() (err error) { l, err = net.Listen("tcp4", fmt.Sprintf(":%d", port)); return err })
	defer l.Close()
	result := make(chan float64, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			result <- -1
			return
		}
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(warmup + window + 10*time.Second))
		buf := make([]byte, 64<<10)
		var total, mark int64
		var first, markAt time.Time
		for {
			n, err := conn.Read(buf)
			if err != nil {
				result <- -1
				return
			}
			now := time.Now()
			total += int64(n)
			switch {
			case first.IsZero():
				first = now
			case markAt.IsZero() && now.Sub(first) >= warmup:
				markAt, mark = now, total
			case !markAt.IsZero() && now.Sub(markAt) >= window:
				result <- float64(total-mark) * 8 * 1500 / 1448 / now.Sub(markAt).Seconds() / 1e6
				return
			}
		}
	}()
	var conn net.Conn
	send.MustDo(func() (err error) {
		conn, err = net.DialTimeout("tcp4", fmt.Sprintf("%s:%d", addr, port), 5*time.Second)
		return err
	})
	go func() {
		defer conn.Close()
		_ = conn.SetWriteDeadline(time.Now().Add(warmup + window + 10*time.Second))
		_, _ = io.Copy(conn, zeroReader{})
	}()
	r := <-result
	if r < 0 {
		t.Fatalf("transfer %s → %s:%d failed", send.Name, addr, port)
	}
	return r
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }
