// Package attachment is the controller that writes ElasticIPAttachment status
// (docs/reference.md#elasticipattachment): the ElasticIP's address, the target NIC's Pod IP and Node, and
// whether the NAT is in force. Only the ElasticIP controller decides who uses an
// address; this controller reports that decision from the attachment's side.
package attachment

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/indexes"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	informers "github.com/loutres/juneau/pkg/generated/informers/externalversions/juneau/v1alpha1"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
	"github.com/loutres/juneau/pkg/workloop"
)

// ControllerName names the loop, its queue and its log lines.
const ControllerName = "elasticipattachment"

// Indexes this controller registers on the ElasticIPAttachment informer.
var Indexes = []string{indexes.AttachmentByElasticIP, indexes.AttachmentByNIC}

// Informers are the shared informers the controller reads.
type Informers struct {
	Attachments       informers.ElasticIPAttachmentInformer
	ElasticIPs        informers.ElasticIPInformer
	NetworkInterfaces informers.NetworkInterfaceInformer
}

// Options tune the controller.
type Options = workloop.Options

// Controller keeps ElasticIPAttachment status.
type Controller struct {
	*workloop.Controller
	status      status.ElasticIPAttachmentWriter
	attachments listers.ElasticIPAttachmentLister
	eips        listers.ElasticIPLister
	nics        listers.NetworkInterfaceLister
	attInf      cache.SharedIndexInformer
}

// NewController registers the indexes and event handlers; it starts nothing.
func NewController(client versioned.Interface, inf Informers, recorder record.EventRecorder, opts Options) (*Controller, error) {
	c := &Controller{
		status: status.ElasticIPAttachments(client, v1alpha1.FieldManagerController, recorder,
			status.Announced{Type: v1alpha1.ConditionReady, Policy: readyEvents}),
		attachments: inf.Attachments.Lister(),
		eips:        inf.ElasticIPs.Lister(),
		nics:        inf.NetworkInterfaces.Lister(),
		attInf:      inf.Attachments.Informer(),
	}
	c.Controller = workloop.NewController(ControllerName, c.sync, opts)
	if err := indexes.Add(c.attInf, Indexes...); err != nil {
		return nil, err
	}
	err := c.Watch(
		workloop.Watch{Informer: c.attInf, Handler: c.Loop.Handler()},
		workloop.Watch{Informer: inf.ElasticIPs.Informer(), Handler: workloop.Funcs(c.onElasticIP)},
		workloop.Watch{Informer: inf.NetworkInterfaces.Informer(), Handler: workloop.Funcs(c.onNIC)},
	)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Controller) onElasticIP(obj any) {
	if eip, ok := obj.(*v1alpha1.ElasticIP); ok {
		c.enqueueIndexed(indexes.AttachmentByElasticIP, indexes.Key(eip.Namespace, eip.Name))
	}
}

func (c *Controller) onNIC(obj any) {
	if nic, ok := obj.(*v1alpha1.NetworkInterface); ok {
		c.enqueueIndexed(indexes.AttachmentByNIC, indexes.Key(nic.Namespace, nic.Name))
	}
}

func (c *Controller) enqueueIndexed(index, value string) {
	atts, err := indexes.ByIndex[*v1alpha1.ElasticIPAttachment](c.attInf, index, value)
	if err != nil {
		return
	}
	for _, a := range atts {
		c.Loop.AddObject(a)
	}
}

// sync writes one attachment's status.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	att, err := c.attachments.ElasticIPAttachments(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	eip, err1 := c.eips.ElasticIPs(namespace).Get(att.Spec.ElasticIPRef.Name)
	nic, err2 := c.nics.NetworkInterfaces(namespace).Get(att.Spec.TargetRef.NetworkInterfaceName)
	if err := errors.Join(ignoreNotFound(err1), ignoreNotFound(err2)); err != nil {
		return err
	}
	if err1 != nil {
		eip = nil
	}
	if err2 != nil {
		nic = nil
	}
	merged := attachmentStatus(att, eip, nic)
	merged.Conditions = status.Merge(att.Status.Conditions, merged.Conditions, metav1.NewTime(c.Clock.Now()))
	if equality.Semantic.DeepEqual(merged, att.Status) {
		return nil
	}
	ready := meta.FindStatusCondition(merged.Conditions, v1alpha1.ConditionReady)
	_, err = c.status.Write(ctx, att, statusApply(att, merged, ready), att.Status.Conditions, merged.Conditions,
		"phase", merged.Phase, "reason", ready.Reason)
	return err
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// statusApply is the apply configuration of the fields this controller owns; a field
// left out is removed.
func statusApply(att *v1alpha1.ElasticIPAttachment, st v1alpha1.ElasticIPAttachmentStatus, ready *metav1.Condition) *applyv1alpha1.ElasticIPAttachmentApplyConfiguration {
	sa := applyv1alpha1.ElasticIPAttachmentStatus().WithPhase(st.Phase)
	if st.ElasticIP != "" {
		sa.WithElasticIP(st.ElasticIP)
	}
	if st.PodIP != "" {
		sa.WithPodIP(st.PodIP)
	}
	if st.NodeName != "" {
		sa.WithNodeName(st.NodeName)
	}
	if ready != nil {
		sa.WithConditions(status.Apply(*ready))
	}
	return applyv1alpha1.ElasticIPAttachment(att.Name, att.Namespace).WithStatus(sa)
}

// readyEvents: becoming Ready is Normal; a missing ElasticIP or NIC, or losing Ready,
// is a Warning; a new reason for waiting is Normal; the first waiting status of a new
// attachment is not announced.
var readyEvents = status.Policy{Quiet: metav1.ConditionFalse, WarnOnLoss: true}
