package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/framework"
	"github.com/loutres/juneau/test/netns"
)

var metricsAddr = regexp.MustCompile(`Serving metrics and health.*address="([^"]+)"`)

// scrape reads /metrics of a component from the address it logged, dialling from ns
// (the agent's Node) or, when ns is nil, from the test's own namespace.
func scrape(t *testing.T, c *framework.Component, ns *netns.NS) string {
	t.Helper()
	m := metricsAddr.FindStringSubmatch(c.Log())
	if m == nil {
		t.Fatalf("%s logged no metrics address:\n%s", c.Name, c.LogTail(10))
	}
	var conn net.Conn
	dial := func() error {
		var err error
		conn, err = net.DialTimeout("tcp", m[1], 5*time.Second)
		return err
	}
	var err error
	if ns != nil {
		err = ns.Do(dial) // the socket stays in the Node's namespace
	} else {
		err = dial()
	}
	if err != nil {
		t.Fatalf("dialling %s of %s: %v", m[1], c.Name, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET /metrics HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", m[1]); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("metrics of %s: %v", c.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics of %s: %d %v", c.Name, resp.StatusCode, err)
	}
	return string(body)
}

// sample sums the samples of a metric (name with its suffix, such as _count) whose
// labels contain every one of labels ("kind=\"Pod\""); found says whether any exists.
func sample(body, name string, labels ...string) (sum float64, found bool) {
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "#") || !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue // another metric whose name starts with this one
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(rest, l)
		}
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
			found = true
		}
	}
	return sum, found
}

// TestMetricsMove: what an operator reads during faults is exported by the controller,
// the webhook and the agent, and moves with what happens: an ElasticIP attached to a
// gated Pod, one refused by the webhook, ARP requests answered and dropped; and the
// agent's syncs stop when nothing happens.
func TestMetricsMove(t *testing.T) {
	c, ns := setup(t)
	ctx := testContext(t)
	node := c.Nodes["node-a"]
	eip := attachSteady(t, c, ns, v1alpha1.PodConditionElasticIP)
	// Refused by the webhook: an address outside every pool.
	bad := "apiVersion: juneau.loutres.me/v1alpha1\nkind: ElasticIP\nmetadata: {name: outside}\nspec: {externalNetwork: ext-net, requestedIP: 10.225.51.200}\n"
	if r := c.CP.Kubectl(ctx, bad, "apply", "-n", ns, "-f", "-"); r.Err == nil {
		t.Fatal("an ElasticIP outside every pool was admitted")
	}
	// ARP: one request answered, one for an address nobody owns.
	if err := freshPing(c, eip); err != nil {
		t.Fatal(err)
	}
	if err := freshPing(c, "10.225.51.77"); err == nil {
		t.Fatal("10.225.51.77 answered")
	}

	// A heartbeat of node-a (what a kubelet writes every few minutes): its conditions,
	// which the agent's cache drops, so the update starts no sync.
	heartbeat := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":%q}]}}`,
		time.Now().UTC().Format(time.RFC3339))
	if _, err := c.CP.Kube.CoreV1().Nodes().Patch(ctx, "node-a", types.StrategicMergePatchType, []byte(heartbeat), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}

	type want struct {
		what   string
		body   func() string
		name   string
		labels []string
		moved  bool // more than zero, not just present
	}
	ctrl := func() string { return scrape(t, c.Controller, nil) }
	hook := func() string { return scrape(t, c.Webhook.Component, nil) }
	agent := func() string { return scrape(t, node.Agent, node.NS) }
	for _, w := range []want{
		{"controller work queue adds", ctrl, "juneau_workqueue_adds_total", []string{`name="elasticip"`}, true},
		{"controller work queue depth", ctrl, "juneau_workqueue_depth", []string{`name="networkinterface"`}, false},
		{"controller reconcile errors", ctrl, "juneau_reconcile_errors_total", []string{`controller="elasticip"`}, false},
		{"heartbeat controller's queue", ctrl, "juneau_workqueue_adds_total", []string{`name="answering"`}, true},
		{"attach latency", ctrl, "juneau_elasticip_attach_seconds_count", nil, true},
		{"webhook requests allowed", hook, "juneau_webhook_requests_total", []string{`kind="ElasticIP"`, `verdict="allowed"`}, true},
		{"webhook requests denied by rule", hook, "juneau_webhook_requests_total", []string{`kind="ElasticIP"`, `verdict="denied"`, `rule="spec.requestedIP"`}, true},
		{"webhook latency", hook, "juneau_webhook_request_duration_seconds_count", []string{`kind="ElasticIPAttachment"`}, true},
		{"agent sync duration", agent, "juneau_node_sync_duration_seconds_count", nil, true},
		{"agent mappings", agent, "juneau_node_nat_mappings", nil, true},
		// The echoes of the Answering condition and the readiness gate it wrote, and the
		// heartbeat above, started no sync.
		{"agent: echoes of its own writes", agent, "juneau_node_updates_ignored_total", []string{`reason="own_write"`}, true},
		{"agent: updates changing nothing kept", agent, "juneau_node_updates_ignored_total", []string{`reason="unchanged"`}, true},
		{"agent reconcile errors", agent, "juneau_reconcile_errors_total", []string{`controller="node-agent"`}, false},
		{"agent work queue", agent, "juneau_workqueue_adds_total", []string{`name="node-agent"`}, true},
		{"ARP requests", agent, "juneau_node_arp_requests_total", nil, true},
		{"ARP replies", agent, "juneau_node_arp_replies_total", nil, true},
		{"ARP drops: not owned", agent, "juneau_node_arp_dropped_total", []string{`reason="not_owned"`}, true},
		{"ARP answered in the kernel", agent, "juneau_node_arp_kernel_path", nil, true},
		{"ARP drops: failed sends", agent, "juneau_node_arp_dropped_total", []string{`reason="send_failed"`}, false},
		{"Pod readiness latency", agent, "juneau_node_pod_ready_seconds_count", nil, true},
	} {
		var v float64
		var found bool
		framework.EventuallyWithin(t, 30*time.Second, w.what, func(context.Context) (bool, string) {
			body := w.body()
			v, found = sample(body, w.name, w.labels...)
			return found && (!w.moved || v > 0), fmt.Sprintf("%s%v: found=%v value=%v", w.name, w.labels, found, v)
		})
		t.Logf("%s: %s%v = %v", w.what, w.name, w.labels, v)
	}

	// Idle, the agent syncs on changes and at its resync period only: once the work
	// above settled, its sync count grows by at most one (a resync) in 3 s. (Its BGP
	// speaker told it of a change at every sync once, which brought a sync every
	// 100 ms forever.)
	var last float64
	var lastAt time.Time
	framework.EventuallyWithin(t, time.Minute, "the idle agent to stop syncing", func(context.Context) (bool, string) {
		if !lastAt.IsZero() && time.Since(lastAt) < 3*time.Second {
			return false, fmt.Sprintf("%v syncs", last)
		}
		v, _ := sample(agent(), "juneau_node_sync_duration_seconds_count")
		quiet := !lastAt.IsZero() && v-last <= 1
		why := fmt.Sprintf("%v syncs, %v more in %v", v, v-last, time.Since(lastAt).Round(time.Millisecond))
		last, lastAt = v, time.Now()
		return quiet, why
	})
}
