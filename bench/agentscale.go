package main

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	juneauclient "github.com/loutres/juneau/pkg/generated/clientset/versioned"
	"github.com/loutres/juneau/pkg/node/nft"
	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/require"
)

// Row 9 (make scale): one real node agent with 10,000, 50,000 and 100,000 mappings on
// its Node. The benchmark writes what the controller would (per address an ElasticIP,
// an ARPAdvertisement naming the Node and an ElasticIPAttachment Attached and Ready
// there); the agent translates each, answers ARP for it and marks the advertisement
// Answering. One Node holding every mapping is the worst case of a cluster with as many
// ElasticIPs: each agent caches every ElasticIP and attachment and translates every
// one for in-cluster clients, but answers ARP and translates from outside only for its own.
const (
	agentScaleNode = "node-a"
	agentScaleNS   = "agent-scale"
	// agentChanges are the single changes timed at each size.
	agentChanges = 30
	// agentSample are the addresses probed to tell that every mapping is served.
	agentSample = 64
	// mappingWriters write the objects in parallel.
	mappingWriters = 16
)

// agentObjects names the objects of mapping i.
func agentObjects(i int) string { return fmt.Sprintf("m-%06d", i) }

// writeMapping creates the ElasticIP, the advertisement and the attachment of m, as the
// controller leaves them (the ElasticIP Allocated and Attached, every agent caches it),
// and makes the attachment Attached and Ready on the Node; it returns when that last
// write returned.
func writeMapping(ctx context.Context, j juneauclient.Interface, name string, m nft.Mapping) (time.Time, error) {
	c := j.JuneauV1alpha1()
	eip, err := c.ElasticIPs(agentScaleNS).Create(ctx, &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ElasticIPSpec{ExternalNetwork: agentScaleNS}}, metav1.CreateOptions{})
	if err != nil {
		return time.Time{}, err
	}
	eip.Status = v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPAttached, Address: m.ElasticIP.String(),
		Attachment: &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindElasticIPAttachment, Name: name}}
	for _, t := range []string{v1alpha1.ConditionAllocated, v1alpha1.ConditionAttached} {
		meta.SetStatusCondition(&eip.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: t,
			Message: "written by the benchmark", ObservedGeneration: eip.Generation})
	}
	if _, err := c.ElasticIPs(agentScaleNS).UpdateStatus(ctx, eip, metav1.UpdateOptions{}); err != nil {
		return time.Time{}, err
	}
	if _, err := c.ARPAdvertisements().Create(ctx, &v1alpha1.ARPAdvertisement{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.ARPAdvertisementSpec{ExternalNetwork: agentScaleNS, Address: m.ElasticIP.String(), NodeName: agentScaleNode},
	}, metav1.CreateOptions{}); err != nil {
		return time.Time{}, err
	}
	a, err := c.ElasticIPAttachments(agentScaleNS).Create(ctx, &v1alpha1.ElasticIPAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ElasticIPAttachmentSpec{ElasticIPRef: v1alpha1.ElasticIPReference{Name: name},
			TargetRef: v1alpha1.AttachmentTarget{NetworkInterfaceName: name}},
	}, metav1.CreateOptions{})
	if err != nil {
		return time.Time{}, err
	}
	a.Status = v1alpha1.ElasticIPAttachmentStatus{Phase: v1alpha1.AttachmentAttached, ElasticIP: m.ElasticIP.String(),
		PodIP: m.PodIP.String(), NodeName: agentScaleNode}
	meta.SetStatusCondition(&a.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: "Attached", Message: "written by the benchmark", ObservedGeneration: a.Generation})
	if _, err := c.ElasticIPAttachments(agentScaleNS).UpdateStatus(ctx, a, metav1.UpdateOptions{}); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

// deleteMapping removes what writeMapping made.
func deleteMapping(ctx context.Context, j juneauclient.Interface, name string) error {
	c := j.JuneauV1alpha1()
	if err := c.ElasticIPAttachments(agentScaleNS).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	if err := c.ARPAdvertisements().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return c.ElasticIPs(agentScaleNS).Delete(ctx, name, metav1.DeleteOptions{})
}

// writeMappings writes mappings first..last-1 of all with mappingWriters in parallel.
func writeMappings(ctx context.Context, e *env, j juneauclient.Interface, all []nft.Mapping, first, last int) {
	next := make(chan int)
	errs := make(chan error, mappingWriters)
	var wg sync.WaitGroup
	for range mappingWriters {
		wg.Go(func() {
			for i := range next {
				if _, err := writeMapping(ctx, j, agentObjects(i), all[i]); err != nil {
					errs <- fmt.Errorf("mapping %d: %w", i, err)
					return
				}
			}
		})
	}
	for i := first; i < last; i++ {
		select {
		case next <- i:
		case err := <-errs:
			close(next)
			wg.Wait()
			e.Fatal(err)
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		e.Fatal(err)
	}
}

// answeringCount counts the advertisements whose Answering condition is True, in pages.
func answeringCount(ctx context.Context, j juneauclient.Interface) (int, error) {
	n, cont := 0, ""
	for {
		l, err := j.JuneauV1alpha1().ARPAdvertisements().List(ctx, metav1.ListOptions{Limit: 5000, Continue: cont})
		if err != nil {
			return 0, err
		}
		for i := range l.Items {
			if meta.IsStatusConditionTrue(l.Items[i].Status.Conditions, v1alpha1.ConditionAnswering) {
				n++
			}
		}
		if cont = l.Continue; cont == "" {
			return n, nil
		}
	}
}

// sample are agentSample addresses spread over the first n mappings, the last included.
func sample(all []nft.Mapping, n int) []netip.Addr {
	out := make([]netip.Addr, 0, agentSample)
	for k := range agentSample {
		out = append(out, all[(k*(n-1))/(agentSample-1)].ElasticIP)
	}
	return out
}

// allAnswered reports whether every address of addrs gets an ARP reply.
func (tp *arpTopology) allAnswered(addrs []netip.Addr) bool {
	for _, a := range addrs {
		if _, ok := tp.probe(a); !ok {
			return false
		}
	}
	return true
}

// firstReply asks for addr every millisecond until a reply comes (or timeout) and
// returns when it came.
func (tp *arpTopology) firstReply(e *env, addr netip.Addr, timeout time.Duration) (time.Time, bool) {
	tp.setTimeout(e, time.Millisecond)
	defer tp.setTimeout(e, probeTimeout)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		sent := time.Now()
		if d, ok := tp.probe(addr); ok {
			return sent.Add(d), true
		}
	}
	return time.Time{}, false
}

func (tp *arpTopology) setTimeout(e *env, d time.Duration) {
	if err := tp.sock.SetReadTimeout(d); err != nil {
		e.Fatal(err)
	}
}

// agentSync reads the agent's sync histogram: syncs so far and their total seconds.
func agentSync(e *env, n *harness.Node) (count, seconds float64) {
	text, err := n.Metrics(context.Background())
	if err != nil {
		e.Fatalf("the agent's metrics: %v", err)
	}
	count, _ = harness.MetricValue(text, "juneau_node_sync_duration_seconds_count")
	seconds, _ = harness.MetricValue(text, "juneau_node_sync_duration_seconds_sum")
	return count, seconds
}

// agentMappings reads how many mappings the agent last programmed.
func agentMappings(n *harness.Node) float64 {
	text, err := n.Metrics(context.Background())
	if err != nil {
		return -1
	}
	v, _ := harness.MetricValue(text, "juneau_node_nat_mappings")
	return v
}

// agentWrites are the resources the agent writes besides its Lease (the reboot's other
// writes are the harness's: the Node's ServiceAccount token).
var agentWrites = map[string]bool{"arpadvertisements": true, "bgpadvertisements": true, "bgpnodestatuses": true,
	"elasticipattachments": true, "elasticips": true, "networkinterfaces": true, "pods": true, "events": true}

// agentRun is what one size measured.
type agentRun struct {
	n                  int
	grow               time.Duration // writing the new mappings until all Answering
	full               time.Duration // reboot → every sampled address answered, n programmed
	rss, rssBefore     int64
	writes             float64 // the restarted agent's writes other than its heartbeat
	writesWhat         string
	change             []time.Duration // attachment Attached → first ARP reply
	syncMean           time.Duration   // the agent's mean sync during the changes
	slowSyncs          []string        // the agent's "Slow datapath sync" lines during the changes
	arpJuneau, arpKern []time.Duration
	lost               int
}

// benchAgentScale (row 9): one agent on the e2e harness's Node with the mappings of
// each size of -agent-sizes: its RSS, its full sync after a reboot of the Node, one
// change's time from the API write to the first ARP reply, and ARP reply latency against
// the kernel answering for the Node's own address.
func benchAgentScale(ctx context.Context, e *env) []Row {
	require.Root(e)
	sizes := e.cfg.agentSizes
	cp := startControlPlane(ctx, e)
	// A client fast enough that the Answering conditions of 100,000 advertisements take
	// minutes to write, not the half hour of the default 50 requests a second.
	c := harness.New(e, cp, harness.Options{Nodes: []string{agentScaleNode}, NoWebhook: true, DualStack: e.cfg.agentIPv6,
		AgentArgs: []string{"--kube-api-qps=1000", "--kube-api-burst=2000"}})
	// The benchmark writes what the controller would; the controller would judge the
	// attachments (they name no ElasticIP that exists) and undo them.
	c.Controller.Stop()
	node := c.Nodes[agentScaleNode]
	ensureNamespace(e, cp, agentScaleNS)
	tp := &arpTopology{client: c.Client, node: node.NS}
	mappings := scaledMappings
	if e.cfg.agentIPv6 {
		tp.ndp, tp.from, tp.own = true, netip.MustParseAddr(harness.ClientIP6), netip.MustParseAddr(node.IP6)
		mappings = scaledMappings6
	}
	tp.openProbe(e)
	j := fastClient(cp)
	maxN := sizes[len(sizes)-1]
	all := mappings(maxN + agentChanges*len(sizes))

	var runs []agentRun
	have := 0
	for si, n := range sizes {
		r := agentRun{n: n}
		start := time.Now()
		writeMappings(ctx, e, j, all, have, n)
		have = n
		e.Logf("%d mappings written in %s", n, time.Since(start).Round(time.Second))
		waitFor(e, fmt.Sprintf("the agent to answer for and mark Answering all %d advertisements", n), 30*time.Minute, func() (bool, string) {
			got, err := answeringCount(ctx, j)
			return err == nil && got == n && tp.allAnswered(sample(all, n)), fmt.Sprintf("%d Answering (%v)", got, err)
		})
		r.grow = time.Since(start)
		r.rssBefore = waitIdle(e, node.Agent.PID(), fmt.Sprintf("agent with %d mappings", n), 10*time.Minute).RSS

		// One change at a time: a new mapping, timed from its attachment's last write to
		// the first ARP reply for its address.
		count0, sec0 := agentSync(e, node)
		logFrom := logSize(node.Agent.LogPath)
		for k := range agentChanges {
			i := maxN + si*agentChanges + k
			written, err := writeMapping(ctx, j, agentObjects(i), all[i])
			if err != nil {
				e.Fatal(err)
			}
			at, ok := tp.firstReply(e, all[i].ElasticIP, time.Minute)
			if !ok {
				e.Fatalf("no reply for %s within a minute of its attachment", all[i].ElasticIP)
			}
			r.change = append(r.change, at.Sub(written))
		}
		count1, sec1 := agentSync(e, node)
		if count1 > count0 {
			r.syncMean = time.Duration((sec1 - sec0) / (count1 - count0) * float64(time.Second))
		}
		r.slowSyncs = logLinesSince(node.Agent.LogPath, logFrom, "Slow datapath sync")
		for k := range agentChanges {
			if err := deleteMapping(ctx, j, agentObjects(maxN+si*agentChanges+k)); err != nil {
				e.Fatal(err)
			}
		}
		waitFor(e, "the changes to be removed", 5*time.Minute, func() (bool, string) {
			got := agentMappings(node)
			return got == float64(n), fmt.Sprintf("%v mappings programmed", got)
		})
		r.arpJuneau, r.arpKern, r.lost = tp.latencies(e, sample(all, n), 2000)

		// A reboot: the Node's namespace (nftables, ARP program) and the agent are gone;
		// everything comes back from the API.
		before := requestCounts(e, cp)
		c.PowerOff(node)
		start = time.Now()
		c.PowerOn(node)
		waitFor(e, fmt.Sprintf("the rebooted agent to serve all %d mappings", n), 10*time.Minute, func() (bool, string) {
			got := agentMappings(node)
			return got == float64(n) && tp.allAnswered(sample(all, n)), fmt.Sprintf("%v mappings programmed", got)
		})
		r.full = time.Since(start)
		r.rss = waitIdle(e, node.Agent.PID(), fmt.Sprintf("rebooted agent with %d mappings", n), 10*time.Minute).RSS
		after := requestCounts(e, cp)
		for k, v := range after {
			if k.Mutating() && agentWrites[k.Resource] && v > before[k] {
				r.writes += v - before[k]
			}
		}
		r.writesWhat = requestsPer(before, after, 1)
		e.Logf("%d mappings: grow %s, full sync after reboot %s, RSS %s (before the reboot %s), change p50 %s p99 %s (agent sync mean %s; syncs of 100 ms or more: %s), reply p99 %s (kernel %s), %d lost; the restart's requests: %s",
			n, r.grow.Round(time.Second), r.full.Round(time.Millisecond), bytesQ(float64(r.rss)), bytesQ(float64(r.rssBefore)),
			medianDuration(r.change), percentile(r.change, 99), r.syncMean, slowSyncsNote(r.slowSyncs), percentile(r.arpJuneau, 99), percentile(r.arpKern, 99), r.lost, r.writesWhat)
		runs = append(runs, r)
	}
	agentPlots(e.plots, runs, e.cfg.agentIPv6)
	return agentRows(runs, e.cfg.agentIPv6)
}

// agentPlots draws row 9's costs against the mappings on the Node, one picture per
// kind of cost (files agent-scale-*.svg; -ipv6 with -agent-ipv6).
func agentPlots(p *plots, runs []agentRun, ipv6 bool) {
	proto, suffix := "ARP", ""
	if ipv6 {
		proto, suffix = "NDP", "-ipv6"
	}
	line := func(get func(agentRun) float64) []point {
		return points(runs, func(r agentRun) int { return r.n }, get)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	const x = "mappings on the Node"
	p.scale("agent-scale-change"+suffix, "9. one change → first "+proto+" reply, against mappings", x, "ms", true, map[string][]point{
		"p50":               line(func(r agentRun) float64 { return ms(medianDuration(r.change)) }),
		"p99":               line(func(r agentRun) float64 { return ms(percentile(r.change, 99)) }),
		"agent's mean sync": line(func(r agentRun) float64 { return ms(r.syncMean) })})
	p.scale("agent-scale-full"+suffix, "9. full sync after a reboot, against mappings", x, "seconds", true, map[string][]point{
		"full sync": line(func(r agentRun) float64 { return r.full.Seconds() })})
	p.scale("agent-scale-rss"+suffix, "9. agent RSS against mappings", x, "MiB", true, map[string][]point{
		"idle after the reboot": line(func(r agentRun) float64 { return float64(r.rss) / (1 << 20) }),
		"before the reboot":     line(func(r agentRun) float64 { return float64(r.rssBefore) / (1 << 20) })})
	p.scale("agent-scale-reply"+suffix, "9. "+proto+" reply p99 against mappings", x, "µs", true, map[string][]point{
		"juneau":                         line(func(r agentRun) float64 { return us(percentile(r.arpJuneau, 99)) }),
		"kernel, the Node's own address": line(func(r agentRun) float64 { return us(percentile(r.arpKern, 99)) })})
}

// agentRows are the rows of row 9, the first size the baseline of the others; with
// IPv6 mappings (answered by NDP) their IDs end in "-ipv6".
func agentRows(runs []agentRun, ipv6 bool) []Row {
	var rows []Row
	first := runs[0]
	proto, suffix := "ARP", ""
	if ipv6 {
		proto, suffix = "NDP", "-ipv6"
	}
	for i, r := range runs {
		id := func(k int) string { return fmt.Sprintf("9%c%s", 'a'+i*4+k, suffix) }
		size := thousands(r.n)
		base := func(q Quantity) (Quantity, string) {
			if i == 0 {
				return Quantity{}, ""
			}
			return q, thousands(first.n) + ", same run"
		}
		full, fullWhat := base(duration(first.full))
		rss, rssWhat := base(bytesQ(float64(first.rss)))
		change, changeWhat := base(duration(medianDuration(first.change)))
		arpBase := duration(percentile(r.arpKern, 99))
		rows = append(rows,
			Row{ID: id(0), What: fmt.Sprintf("agent: full sync after a reboot, %s mappings", size), Figure: duration(r.full), Baseline: full, BaselineWhat: fullWhat,
				Note: fmt.Sprintf("the Node's namespace and agent killed and started again with %s ElasticIPAttachments Attached on it and as many ARPAdvertisements; from the agent's start to every mapping programmed (juneau_node_nat_mappings) and %d addresses spread over them answering %s; writes of the restarted agent other than its Lease: %.0f (all requests of the reboot: %s); writing the mappings and their Answering conditions took %s",
					size, agentSample, proto, r.writes, r.writesWhat, r.grow.Round(time.Second))},
			Row{ID: id(1), What: fmt.Sprintf("agent: RSS with %s mappings", size), Figure: bytesQ(float64(r.rss)), Baseline: rss, BaselineWhat: rssWhat,
				Note: fmt.Sprintf("after the full sync, once idle; before the reboot (after writing the Answering conditions) %s", bytesQ(float64(r.rssBefore)))},
			Row{ID: id(2), What: fmt.Sprintf("agent: one change on %s mappings (median)", size), Figure: duration(medianDuration(r.change)), Baseline: change, BaselineWhat: changeWhat,
				Note: fmt.Sprintf("%d new mappings one after another, each from its attachment's status write (Attached, Ready) returning to the first %s reply for its address, asked every millisecond: watch, sync, nftables, %s; p99 %s; the agent's mean sync (juneau_node_sync_duration_seconds) over them %s; the agent's syncs of 100 ms or more meanwhile: %s",
					len(r.change), proto, proto, percentile(r.change, 99).Round(time.Microsecond), r.syncMean.Round(time.Microsecond), slowSyncsNote(r.slowSyncs))},
			Row{ID: id(3), What: fmt.Sprintf("agent: %s reply p99, %s addresses", proto, size), Figure: duration(percentile(r.arpJuneau, 99)), Baseline: arpBase, BaselineWhat: "kernel, own address",
				Note: fmt.Sprintf("2,000 requests for %d addresses spread over the %s, alternating with requests for the Node's own address answered by the kernel; p50 %s (kernel %s); %d lost",
					agentSample, size, percentile(r.arpJuneau, 50).Round(time.Microsecond), percentile(r.arpKern, 50).Round(time.Microsecond), r.lost)},
		)
	}
	return rows
}

// waitFor polls cond every second until it holds, failing after timeout with its last word.
// Not framework.EventuallyWithin: its 100 ms polls would list 100,000 advertisements ten
// times a second.
func waitFor(e *env, what string, timeout time.Duration, cond func() (bool, string)) {
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(context.Context) (bool, error) {
		ok, why := cond()
		last = why
		return ok, nil
	})
	if err != nil {
		e.Fatalf("waiting for %s: %v; %s", what, err, strings.TrimSpace(last))
	}
}
