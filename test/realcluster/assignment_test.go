package realcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
	"github.com/loutres/juneau/test/cluster"
	"github.com/loutres/juneau/test/images"
	"github.com/loutres/juneau/test/netns"
	"github.com/loutres/juneau/test/nftlist"
)

// addressWatch follows every Pod of a namespace through a watch and records each moment
// two Pods carried the same address in their write-back annotations (juneau's
// allocated-eip-address or the managed-cloud allocated-eipAddress). The events of one
// watch come in the API server's order, so each state it rebuilds existed.
type addressWatch struct {
	mu         sync.Mutex
	carried    map[string]string // Pod name -> address
	violations []string
	stop       func()
	done       chan struct{}
}

func watchAddresses(t *testing.T, c *cluster.Cluster, ns string) *addressWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	aw := &addressWatch{carried: map[string]string{}, stop: func() { w.Stop(); cancel() }, done: make(chan struct{})}
	go func() {
		defer close(aw.done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			aw.mu.Lock()
			if ev.Type == watch.Deleted {
				delete(aw.carried, p.Name)
			} else {
				addr := p.Annotations[v1alpha1.AnnotationAllocatedEIPAddr]
				if alias := p.Annotations[v1alpha1.AliasAllocatedEIPAddress]; addr == "" {
					addr = alias
				}
				aw.carried[p.Name] = addr
			}
			byAddr := map[string][]string{}
			for pod, a := range aw.carried {
				if a != "" {
					byAddr[a] = append(byAddr[a], pod)
				}
			}
			for a, pods := range byAddr {
				if len(pods) > 1 {
					slices.Sort(pods)
					aw.violations = append(aw.violations, fmt.Sprintf("%s carried by %s (resourceVersion %s)", a, strings.Join(pods, ", "), p.ResourceVersion))
				}
			}
			aw.mu.Unlock()
		}
	}()
	t.Cleanup(aw.stop)
	return aw
}

// check fails the test for every moment two Pods carried one address.
func (aw *addressWatch) check(t *testing.T) {
	t.Helper()
	aw.mu.Lock()
	defer aw.mu.Unlock()
	for _, v := range aw.violations {
		t.Errorf("two Pods carried one address: %s", v)
	}
}

// eipWorks waits for what a user looks at: the ElasticIP's Attached condition True
// (reason Attached), the Pod's readiness gate True, for a Pod that asks for an automatic
// ElasticIP its write-back annotations naming the ElasticIP and its address, and the
// external client answered by the Pod at the address. It returns the address.
func eipWorks(t *testing.T, c *cluster.Cluster, ns, eipName, pod string) string {
	t.Helper()
	var eip *v1alpha1.ElasticIP
	var p *corev1.Pod
	err := wait.PollUntilContextTimeout(testContext(t, 3*time.Minute), 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		e, err := c.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(ctx, eipName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		got, err := c.Kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		eip, p = e, got
		att := meta.FindStatusCondition(eip.Status.Conditions, v1alpha1.ConditionAttached)
		gate := status.PodCondition(p, v1alpha1.PodConditionElasticIP)
		written := true
		if auto, _ := annotations.ParseAuto(p.Annotations); auto.Wanted() {
			written = p.Annotations[v1alpha1.AnnotationAllocatedEIPName] == eipName && p.Annotations[v1alpha1.AnnotationAllocatedEIPAddr] == eip.Status.Address
		}
		return att != nil && att.Status == metav1.ConditionTrue && att.Reason == v1alpha1.ReasonAttached &&
			gate != nil && gate.Status == corev1.ConditionTrue && written, nil
	})
	if err != nil {
		t.Fatalf("ElasticIP %s/%s not working for Pod %s: %v\nElasticIP status %+v\nPod annotations %v conditions %+v",
			ns, eipName, pod, err, eip, p.Annotations, p.Status.Conditions)
	}
	netns.Attach(t, "client", c.ClientNS).FlushNeighbour("eth0", eip.Status.Address)
	reach(t, c, eip.Status.Address, pod)
	return eip.Status.Address
}

// gatedBoxPod is a box Pod with annotations, listing juneau's readiness gate.
func gatedBoxPod(name, annotations string) string {
	return boxPodYAML(name, annotations) + "  readinessGates: [{conditionType: juneau.loutres.me/elastic-ip}]\n"
}

// testOneElasticIPOnePod: a Pod naming an ElasticIP another Pod uses is refused, by
// either key, naming that Pod; two Pods applied together naming one free ElasticIP: one
// is reachable at once, the other waits, told why, with no address annotation, and takes
// the ElasticIP over when the first goes; a Pod that stops asking loses its annotations;
// a Deployment scaled down and up never has two Pods carrying one address.
func testOneElasticIPOnePod(t *testing.T, c *cluster.Cluster) {
	ns := namespace(t, c, "one-eip")
	aw := watchAddresses(t, c, ns)

	// Refused by the webhook: in use by NAT, and in use directly.
	kubectl(t, c, gatedBoxPod("nginx", "")+"---\n"+natYAML("nginx")+eipYAML("dir-eip")+
		gatedBoxPod("dir", `{juneau.loutres.me/elastic-ip: dir-eip}`), "-n", ns, "apply", "-f", "-")
	waitPods(t, c, ns, "nginx", "dir")
	for _, key := range []string{v1alpha1.AnnotationPodEIPName, v1alpha1.AliasPodEIPInstance} {
		for _, tc := range []struct{ eip, want string }{
			{"nginx-eip", `ElasticIP "nginx-eip" is used by Pod "nginx" (through ElasticIPAttachment "nginx-attach")`},
			{"dir-eip", `ElasticIP "dir-eip" is used by Pod "dir" (directly, NetworkInterface "dir.eth0")`},
		} {
			out, err := c.KubectlRun(testContext(t, time.Minute), gatedBoxPod("thief", fmt.Sprintf("{%s: %s}", key, tc.eip)), "-n", ns, "create", "-f", "-")
			if err == nil || !strings.Contains(err.Error(), "metadata.annotations["+key+"]") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("a Pod naming %s by %s: %v %s; want a refusal saying %s", tc.eip, key, err, out, tc.want)
			}
		}
	}

	// Two Pods applied together naming one free ElasticIP.
	kubectl(t, c, eipYAML("shared"), "-n", ns, "apply", "-f", "-")
	start := time.Now()
	kubectl(t, c, gatedBoxPod("first", `{juneau.loutres.me/pod-eip-name: shared}`)+"---\n"+
		gatedBoxPod("second", `{network.alibabacloud.com/pod-eip-instanceid: shared}`), "-n", ns, "apply", "-f", "-")
	var winner, loser string
	err := wait.PollUntilContextTimeout(testContext(t, 2*time.Minute), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var holders []string
		for _, name := range []string{"first", "second"} {
			p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if cond := status.PodCondition(p, v1alpha1.PodConditionElasticIPAssigned); cond != nil && cond.Status == corev1.ConditionTrue {
				holders = append(holders, name)
			}
		}
		if len(holders) > 1 {
			return false, fmt.Errorf("both Pods were given ElasticIP shared: %v", holders)
		}
		if len(holders) == 1 {
			winner = holders[0]
		}
		return winner != "", nil
	})
	if err != nil {
		t.Fatalf("no Pod got ElasticIP shared: %v", err)
	}
	loser = map[string]string{"first": "second", "second": "first"}[winner]
	addr := eipWorks(t, c, ns, "shared", winner)
	t.Logf("%s reached at %s %s after both Pods were applied; %s waits", winner, addr, time.Since(start).Round(time.Millisecond), loser)
	// The other waits, told why, in its condition, its readiness gate and an Event.
	why := fmt.Sprintf(`ElasticIP "shared" is used by Pod %q (through ElasticIPAttachment %q)`, winner, winner)
	var p *corev1.Pod
	err = wait.PollUntilContextTimeout(testContext(t, time.Minute), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if p, err = c.Kube.CoreV1().Pods(ns).Get(ctx, loser, metav1.GetOptions{}); err != nil {
			return false, nil
		}
		cond, gate := status.PodCondition(p, v1alpha1.PodConditionElasticIPAssigned), status.PodCondition(p, v1alpha1.PodConditionElasticIP)
		return cond != nil && cond.Status == corev1.ConditionFalse && cond.Reason == v1alpha1.ReasonElasticIPInUse && strings.Contains(cond.Message, why) &&
			gate != nil && gate.Status == corev1.ConditionFalse && strings.Contains(gate.Message, "no ElasticIP is attached to this Pod yet: "+why), nil
	})
	if err != nil {
		t.Fatalf("the waiting Pod %s is not told why: %v\n%+v", loser, err, p.Status.Conditions)
	}
	for _, k := range []string{v1alpha1.AnnotationAllocatedEIPAddr, v1alpha1.AnnotationAllocatedEIPName, v1alpha1.AliasAllocatedEIPAddress, v1alpha1.AliasAllocatedEIPID} {
		if v, ok := p.Annotations[k]; ok {
			t.Errorf("the waiting Pod %s carries %s=%q", loser, k, v)
		}
	}
	if events := kubectl(t, c, "", "-n", ns, "get", "events", "--field-selector", "involvedObject.name="+loser+",reason="+v1alpha1.ReasonElasticIPInUse, "-o", "name"); strings.TrimSpace(events) == "" {
		t.Errorf("no %s Event on the waiting Pod %s", v1alpha1.ReasonElasticIPInUse, loser)
	}
	if atts := attachmentsOfElasticIP(t, c, ns, "shared"); !slices.Equal(atts, []string{winner}) {
		t.Errorf("attachments of ElasticIP shared: %v, want %s's alone", atts, winner)
	}

	// The first goes: the other takes the ElasticIP over.
	kubectl(t, c, "", "-n", ns, "delete", "pod", winner, "--wait=true")
	if again := eipWorks(t, c, ns, "shared", loser); again != addr {
		t.Errorf("ElasticIP shared has %s now, want %s", again, addr)
	}
	if loser == "second" {
		p, err := c.Kube.CoreV1().Pods(ns).Get(context.Background(), loser, metav1.GetOptions{})
		if err != nil || p.Annotations[v1alpha1.AliasAllocatedEIPAddress] != addr || p.Annotations[v1alpha1.AliasAllocatedEIPID] != "shared" {
			t.Errorf("Pod second asked with the managed-cloud key: annotations %v (%v), want its names of the ElasticIP too", p.Annotations, err)
		}
	}

	// It stops asking: its attachment goes and so do its annotations.
	kubectl(t, c, "", "-n", ns, "annotate", "pod", loser, v1alpha1.AnnotationPodEIPName+"-", v1alpha1.AliasPodEIPInstance+"-")
	err = wait.PollUntilContextTimeout(testContext(t, time.Minute), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, loser, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, k := range []string{v1alpha1.AnnotationAllocatedEIPAddr, v1alpha1.AnnotationAllocatedEIPName, v1alpha1.AliasAllocatedEIPAddress} {
			if _, ok := p.Annotations[k]; ok {
				return false, nil
			}
		}
		return len(attachmentsOfElasticIP(t, c, ns, "shared")) == 0, nil
	})
	if err != nil {
		t.Errorf("Pod %s stopped asking but keeps its address annotations or attachment: %v", loser, err)
	}

	// Scaled down and up: every Pod carries its own ElasticIP's address, never another's.
	kubectl(t, c, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: fleet}
spec:
  replicas: 3
  selector: {matchLabels: {app: fleet}}
  template:
    `+podTemplate+`
`, "fleet", images.Box), "-n", ns, "apply", "-f", "-")
	kubectl(t, c, "", "-n", ns, "rollout", "status", "deployment/fleet", "--timeout=4m")
	kubectl(t, c, "", "-n", ns, "scale", "deployment/fleet", "--replicas=1")
	waitReplicas(t, c, ns, "app=fleet", 1)
	kubectl(t, c, "", "-n", ns, "scale", "deployment/fleet", "--replicas=3")
	kubectl(t, c, "", "-n", ns, "rollout", "status", "deployment/fleet", "--timeout=4m")
	for _, pod := range podsOf(t, c, ns, "app=fleet") {
		eipWorks(t, c, ns, pod, pod)
	}
	ownAddressesOnly(t, c, ns)
	aw.check(t)
}

// ownAddressesOnly checks that every Pod of the namespace carrying an address annotation
// holds that ElasticIP: the ElasticIP of that name has that address and its user is the
// Pod's own attachment.
func ownAddressesOnly(t *testing.T, c *cluster.Cluster, ns string) {
	t.Helper()
	pods, err := c.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		name, addr := p.Annotations[v1alpha1.AnnotationAllocatedEIPName], p.Annotations[v1alpha1.AnnotationAllocatedEIPAddr]
		if name == "" && addr == "" {
			continue
		}
		eip, err := c.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || eip.Status.Address != addr || eip.Status.Attachment == nil || eip.Status.Attachment.Name != p.Name {
			t.Errorf("Pod %s carries %s=%s, but the ElasticIP is %+v (%v)", p.Name, name, addr, eip, err)
		}
	}
}

func attachmentsOfElasticIP(t *testing.T, c *cluster.Cluster, ns, eip string) []string {
	t.Helper()
	list, err := c.Juneau.JuneauV1alpha1().ElasticIPAttachments(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range list.Items {
		if a.Spec.ElasticIPRef.Name == eip && a.DeletionTimestamp == nil {
			out = append(out, a.Name)
		}
	}
	slices.Sort(out)
	return out
}

// waitReplicas waits until exactly n Pods of the selector exist (terminating ones gone).
func waitReplicas(t *testing.T, c *cluster.Cluster, ns, selector string, n int) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(testContext(t, 3*time.Minute), 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		return err == nil && len(list.Items) == n, nil
	}); err != nil {
		t.Fatalf("Pods %s not %d: %v", selector, n, err)
	}
}

// testNftListable: on every Node, the nft of the distribution lists the whole ruleset,
// juneau's tables included, without an error (test/nftlist), after the scenarios above
// filled them.
func testNftListable(t *testing.T, c *cluster.Cluster) {
	for _, n := range c.Nodes {
		for _, args := range [][]string{{"list", "ruleset"}, {"list", "table", "ip", "juneau"}} {
			cmd, err := n.Command(testContext(t, time.Minute), append([]string{"nft"}, args...)...)
			if err != nil {
				t.Fatal(err)
			}
			out, err := nftlist.Run(cmd)
			if err != nil {
				t.Errorf("on %s: %v", n.Name, err)
			}
			if !strings.Contains(out, "table ip juneau") {
				t.Errorf("on %s: nft %s shows no juneau table:\n%s", n.Name, strings.Join(args, " "), out)
			}
		}
	}
}
