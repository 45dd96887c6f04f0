package main

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/test/framework"
)

// kwokStages is what kwok plays for the Nodes and Pods of the scale benchmark.
//
//go:embed kwok-stages.yaml
var kwokStages []byte

// kwokPodCIDR is where kwok takes the simulated Pods' addresses from. They exist only as
// API objects of the benchmark's own control plane; nothing is routed to them.
const kwokPodCIDR = "10.240.0.0/12"

// startKwok runs kwok against cp, managing every Node: it turns Nodes Ready, renews their
// Leases every 10 s as kubelets do (40 s Leases), and runs the Pods bound to them.
func startKwok(e *env, cp *framework.ControlPlane) *framework.Component {
	bin, err := framework.Kwok()
	if err != nil {
		e.Fatal(err)
	}
	cfg := filepath.Join(e.TempDir(), "kwok.yaml")
	if err := os.WriteFile(cfg, kwokStages, 0o644); err != nil {
		e.Fatal(err)
	}
	return framework.StartCommand(e, "kwok", bin, "--kubeconfig="+cp.Kubeconfig, "--config="+cfg,
		"--manage-all-nodes=true", "--cidr="+kwokPodCIDR, "--node-lease-duration-seconds=40", "--v=WARN")
}

// kwokNodeName names the i-th simulated Node.
func kwokNodeName(i int) string { return fmt.Sprintf("kwok-node-%d", i) }

// createKwokNodes creates n Nodes and waits until kwok has turned every one Ready.
func createKwokNodes(ctx context.Context, e *env, cp *framework.ControlPlane, kwok *framework.Component, n int) {
	start := time.Now()
	nodes := fastKube(cp).CoreV1().Nodes()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range n {
		g.Go(func() error {
			_, err := nodes.Create(gctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:        kwokNodeName(i),
				Labels:      map[string]string{"type": "kwok", corev1.LabelHostname: kwokNodeName(i)},
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			}}, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		e.Fatalf("creating %d Nodes: %v", n, err)
	}
	ready := 0
	err := wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		if done, err := kwok.Exited(); done {
			return false, fmt.Errorf("kwok exited: %v\n%s", err, kwok.LogTail(20))
		}
		list, err := nodes.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		ready = 0
		for _, node := range list.Items {
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == n, nil
	})
	if err != nil {
		e.Fatalf("%d of %d kwok Nodes Ready: %v", ready, n, err)
	}
	e.Logf("%d kwok Nodes Ready in %s", n, time.Since(start).Round(100*time.Millisecond))
}
