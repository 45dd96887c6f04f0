package realcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/advertisement"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
	"github.com/loutres/juneau/test/cluster"
)

// steps records when each step of the ElasticIP Pod's way back was first seen, from the
// power-off (or, in time-to-reachable, from the Pod's creation): the Pod scheduled, its
// IP, its NetworkInterface, the sandbox's addresses in it and it Ready, the
// ElasticIPAttachment made for the Pod and Ready there, the
// advertisement moved and Answering (arp) or Announced (bgp) from the new Node, the
// ElasticIP Attached, the Pod's readiness gate, the Pod Ready.
type steps struct {
	start time.Time
	at    map[string]time.Duration
	order []string
}

func newSteps(start time.Time) *steps { return &steps{start: start, at: map[string]time.Duration{}} }

func (s *steps) seen(name string, ok bool) {
	if _, done := s.at[name]; ok && !done {
		s.at[name] = time.Since(s.start)
		s.order = append(s.order, name)
	}
}

// observe looks once at the re-created Pod (p, nil while not there) and its objects.
func (s *steps) observe(ctx context.Context, c *cluster.Cluster, ns string, p *corev1.Pod, network string) {
	if p == nil {
		return
	}
	node := p.Spec.NodeName
	s.seen("scheduled", node != "")
	s.seen("pod IP", p.Status.PodIP != "")
	if c := status.PodCondition(p, string(corev1.PodReady)); p.Status.PodIP != "" && c != nil && c.Status != corev1.ConditionTrue {
		// What the kubelet said when it reported the IP without Ready.
		s.seen(fmt.Sprintf("not Ready with the IP: %s: %s", c.Reason, c.Message), true)
	}
	s.seen("readiness gate", condition(p, v1alpha1.PodConditionElasticIP) == corev1.ConditionTrue)
	s.seen("Ready", condition(p, corev1.PodReady) == corev1.ConditionTrue)
	if node == "" {
		return
	}
	j := c.Juneau.JuneauV1alpha1()
	if nic, err := j.NetworkInterfaces(ns).Get(ctx, v1alpha1.NetworkInterfaceName(p.Name, v1alpha1.DefaultInterface), metav1.GetOptions{}); err == nil &&
		nic.Spec.PodRef.UID == string(p.UID) {
		s.seen("NetworkInterface", true)
		s.seen("sandbox addresses", len(nic.Status.SandboxAddresses) > 0)
		s.seen("NetworkInterface Ready", meta.IsStatusConditionTrue(nic.Status.Conditions, v1alpha1.ConditionReady))
	}
	if a, err := j.ElasticIPAttachments(ns).Get(ctx, p.Name, metav1.GetOptions{}); err == nil {
		s.seen("attachment", a.Spec.TargetRef.NetworkInterfaceName == v1alpha1.NetworkInterfaceName(p.Name, v1alpha1.DefaultInterface) &&
			slices.ContainsFunc(a.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == p.UID }))
		s.seen("attachment Ready", a.Status.NodeName == node && meta.IsStatusConditionTrue(a.Status.Conditions, v1alpha1.ConditionReady))
	}
	if e, err := j.ElasticIPs(ns).Get(ctx, p.Name, metav1.GetOptions{}); err == nil {
		s.seen("ElasticIP Attached", meta.IsStatusConditionTrue(e.Status.Conditions, v1alpha1.ConditionAttached) && s.has("attachment Ready"))
	}
	name := advertisement.PreferredName(ns, p.Name)
	if network == "bgp-net" {
		if ad, err := j.BGPAdvertisements().Get(ctx, name, metav1.GetOptions{}); err == nil && ad.Spec.NodeName == node {
			s.seen("advertisement moved", true)
			s.seen("Announced", meta.IsStatusConditionTrue(ad.Status.Conditions, v1alpha1.ConditionAnnounced))
		}
		return
	}
	if ad, err := j.ARPAdvertisements().Get(ctx, name, metav1.GetOptions{}); err == nil && ad.Spec.NodeName == node {
		s.seen("advertisement moved", true)
		cond := meta.FindStatusCondition(ad.Status.Conditions, v1alpha1.ConditionAnswering)
		s.seen("Answering", cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == ad.Generation)
	}
}

// stepWebhookOut: the dead Node's webhook replica left the ready endpoints.
const stepWebhookOut = "webhook replica out of the endpoints"

// observeWebhook looks once whether the webhook replica at ip, on the dead Node, is
// still a ready endpoint of the webhook's Service: the API server dials it until then
// (docs/operations.md#a-node-dies).
func (s *steps) observeWebhook(ctx context.Context, c *cluster.Cluster, ip string) {
	if ip == "" || s.has(stepWebhookOut) {
		return
	}
	list, err := c.Kube.DiscoveryV1().EndpointSlices(cluster.SystemNamespace).List(ctx,
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=juneau-webhook"})
	if err != nil {
		return
	}
	for _, slice := range list.Items {
		for _, ep := range slice.Endpoints {
			if slices.Contains(ep.Addresses, ip) && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
				return
			}
		}
	}
	s.seen(stepWebhookOut, true)
}

func (s *steps) has(name string) bool { _, ok := s.at[name]; return ok }

// String lists the steps in the order they were seen.
func (s *steps) String() string {
	order := slices.Clone(s.order)
	slices.SortStableFunc(order, func(a, b string) int { return int(s.at[a] - s.at[b]) })
	var b strings.Builder
	for _, name := range order {
		fmt.Fprintf(&b, "  %8s  %s\n", s.at[name].Round(10*time.Millisecond), name)
	}
	return b.String()
}
