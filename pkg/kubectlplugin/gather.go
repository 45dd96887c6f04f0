package kubectlplugin

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/heartbeat"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
)

// Clients are what the plugin reads with; NodeNamespace is where the node agents run
// and keep their heartbeat Leases.
type Clients struct {
	Kube          kubernetes.Interface
	Juneau        versioned.Interface
	NodeNamespace string
	// Now is the time heartbeats are judged at; zero: time.Now.
	Now func() time.Time
}

func (c Clients) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Gather reads the facts about namespace/name: an ElasticIP of that name, else a Pod.
func (c Clients) Gather(ctx context.Context, namespace, name string) (Facts, error) {
	f := Facts{Namespace: namespace, Name: name}
	eip, err := c.Juneau.JuneauV1alpha1().ElasticIPs(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		f.ElasticIP, f.ElasticIPName = eip, eip.Name
		if err := c.podOfElasticIP(ctx, &f); err != nil {
			return f, err
		}
	case apierrors.IsNotFound(err):
		pod, err := c.Kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			f.Refusal, err = c.refusal(ctx, namespace, name)
			return f, err
		}
		if err != nil {
			return f, err
		}
		f.Pod = pod
		if err := c.elasticIPOfPod(ctx, &f); err != nil {
			return f, err
		}
	default:
		return f, err
	}
	return f, c.rest(ctx, &f)
}

// podOfElasticIP finds the Pod using the ElasticIP: its NIC's, or its attachment's
// target NIC's.
func (c Clients) podOfElasticIP(ctx context.Context, f *Facts) error {
	a := f.ElasticIP.Status.Attachment
	if a == nil {
		return nil
	}
	nicName := a.Name
	if a.Kind == v1alpha1.AttachmentKindElasticIPAttachment {
		att, err := c.Juneau.JuneauV1alpha1().ElasticIPAttachments(f.Namespace).Get(ctx, a.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		nicName, f.PodAttachment = att.Spec.TargetRef.NetworkInterfaceName, att.Name
	}
	nic, err := c.Juneau.JuneauV1alpha1().NetworkInterfaces(f.Namespace).Get(ctx, nicName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	pod, err := c.Kube.CoreV1().Pods(f.Namespace).Get(ctx, nic.Spec.PodRef.Name, metav1.GetOptions{})
	if err == nil {
		f.Pod = pod
		return nil
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// elasticIPOfPod finds the ElasticIP a Pod asks for or uses: its annotations, an
// attachment targeting its eth0, an automatic ElasticIP labelled with its name.
func (c Clients) elasticIPOfPod(ctx context.Context, f *Facts) error {
	p := f.Pod
	atts, err := c.Juneau.JuneauV1alpha1().ElasticIPAttachments(p.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, a := range atts.Items {
		if a.Spec.TargetRef.NetworkInterfaceName == p.Name+".eth0" && a.DeletionTimestamp == nil {
			f.PodAttachment, f.ElasticIPName = a.Name, a.Spec.ElasticIPRef.Name
		}
	}
	for _, key := range []string{v1alpha1.AnnotationElasticIP, v1alpha1.AnnotationPodEIPName, v1alpha1.AnnotationAllocatedEIPName,
		"network.alibabacloud.com/pod-eip-instanceid"} {
		if v := p.Annotations[key]; v != "" {
			f.ElasticIPName = v
			break
		}
	}
	if f.ElasticIPName == "" {
		eips, err := c.Juneau.JuneauV1alpha1().ElasticIPs(p.Namespace).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelPod + "=" + p.Name})
		if err != nil {
			return err
		}
		if len(eips.Items) > 0 {
			f.ElasticIPName = eips.Items[0].Name
		}
	}
	if f.ElasticIPName == "" {
		return nil
	}
	eip, err := c.Juneau.JuneauV1alpha1().ElasticIPs(p.Namespace).Get(ctx, f.ElasticIPName, metav1.GetOptions{})
	if err == nil {
		f.ElasticIP = eip
		if f.PodAttachment == "" && eip.Status.Attachment != nil && eip.Status.Attachment.Kind == v1alpha1.AttachmentKindElasticIPAttachment {
			// An attachment made for this Pod by the controller (pod-eip-name, automatic).
			if att, err := c.Juneau.JuneauV1alpha1().ElasticIPAttachments(p.Namespace).Get(ctx, eip.Status.Attachment.Name, metav1.GetOptions{}); err == nil &&
				att.Spec.TargetRef.NetworkInterfaceName == p.Name+".eth0" {
				f.PodAttachment = att.Name
			}
		}
		return nil
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// rest reads the network, pools, advertisements, Node and agent.
func (c Clients) rest(ctx context.Context, f *Facts) error {
	if e := f.ElasticIP; e != nil {
		net, err := c.Juneau.JuneauV1alpha1().ExternalNetworks().Get(ctx, e.Spec.ExternalNetwork, metav1.GetOptions{})
		if err == nil {
			f.Network = net
			for _, name := range net.Spec.AddressPools {
				if p, err := c.Juneau.JuneauV1alpha1().AddressPools().Get(ctx, name, metav1.GetOptions{}); err == nil {
					f.Pools = append(f.Pools, p)
				}
			}
		}
		sel := metav1.ListOptions{LabelSelector: v1alpha1.LabelOwnerUID + "=" + string(e.UID)}
		if ads, err := c.Juneau.JuneauV1alpha1().ARPAdvertisements().List(ctx, sel); err == nil && len(ads.Items) > 0 {
			f.ARP = &ads.Items[0]
		}
		if ads, err := c.Juneau.JuneauV1alpha1().BGPAdvertisements().List(ctx, sel); err == nil && len(ads.Items) > 0 {
			f.BGP = &ads.Items[0]
		}
	}
	switch {
	case f.Pod != nil && f.Pod.Spec.NodeName != "":
		f.Node = f.Pod.Spec.NodeName
	case f.ARP != nil:
		f.Node = f.ARP.Spec.NodeName
	case f.BGP != nil:
		f.Node = f.BGP.Spec.NodeName
	}
	if f.Node == "" {
		return nil
	}
	if s, err := c.Juneau.JuneauV1alpha1().BGPNodeStatuses().Get(ctx, f.Node, metav1.GetOptions{}); err == nil {
		f.BGPNode = s
	}
	var err error
	f.Agent, err = c.agent(ctx, f.Node)
	return err
}

// agent finds the newest agent Pod on node and judges its heartbeat Lease.
func (c Clients) agent(ctx context.Context, node string) (Agent, error) {
	var a Agent
	pods, err := c.Kube.CoreV1().Pods(c.NodeNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=juneau,app.kubernetes.io/component=node",
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return a, err
	}
	var newest *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && (newest == nil || p.CreationTimestamp.After(newest.CreationTimestamp.Time)) {
			newest = p
		}
	}
	if newest == nil {
		return a, nil
	}
	a.Pod = newest.Name
	for _, cond := range newest.Status.Conditions {
		if cond.Type == corev1.PodReady {
			a.Ready = cond.Status == corev1.ConditionTrue
		}
	}
	lease, err := c.Kube.CoordinationV1().Leases(c.NodeNamespace).Get(ctx, v1alpha1.NodeLeasePrefix+node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease, err = nil, nil
	}
	if err != nil {
		return a, err
	}
	a.Heartbeat = heartbeat.Judge(lease, c.NodeNamespace, node, c.now()).Alive
	return a, nil
}

// refusal finds the latest Event saying the juneau webhook refused a Pod or ElasticIP of
// this name, or one a workload of this name tried to create (FailedCreate).
func (c Clients) refusal(ctx context.Context, namespace, name string) (string, error) {
	events, err := c.Kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	sort.Slice(events.Items, func(i, j int) bool {
		return eventTime(&events.Items[i]).Before(eventTime(&events.Items[j]))
	})
	var last string
	for _, e := range events.Items {
		if !strings.Contains(e.Message, `validate.juneau.loutres.me" denied the request`) {
			continue
		}
		obj := e.InvolvedObject.Name
		if obj == name || strings.HasPrefix(name, obj) || strings.HasPrefix(obj, name) {
			last = fmt.Sprintf("%s %s: %s", e.InvolvedObject.Kind, obj, e.Message)
		}
	}
	return last, nil
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
