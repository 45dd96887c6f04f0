// Package attachment is the controller that writes ElasticIPAttachment status
// (docs/reference.md#elasticipattachment): the ElasticIP's address, the target NIC's Pod IP and Node, and
// whether the NAT is in force. Only the ElasticIP controller decides who uses an
// address; this controller reports that decision from the attachment's side.
package attachment

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

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
type Options struct {
	// Errors counts failed syncs; may be nil.
	Errors workloop.ErrorCounter
	// QueueMetrics receives the work queue's metrics (workloop.NewQueueMetrics); may be nil.
	QueueMetrics workqueue.MetricsProvider
	// Clock stamps condition transitions; nil means the real clock.
	Clock clock.PassiveClock
}

// Controller keeps ElasticIPAttachment status.
type Controller struct {
	client   versioned.Interface
	recorder record.EventRecorder
	clock    clock.PassiveClock

	attachments listers.ElasticIPAttachmentLister
	eips        listers.ElasticIPLister
	nics        listers.NetworkInterfaceLister
	attInf      cache.SharedIndexInformer
	loop        *workloop.Loop
	synced      []cache.InformerSynced
}

// NewController registers the indexes and event handlers; it starts nothing.
func NewController(client versioned.Interface, inf Informers, recorder record.EventRecorder, opts Options) (*Controller, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	c := &Controller{
		client:      client,
		recorder:    recorder,
		clock:       opts.Clock,
		attachments: inf.Attachments.Lister(),
		eips:        inf.ElasticIPs.Lister(),
		nics:        inf.NetworkInterfaces.Lister(),
		attInf:      inf.Attachments.Informer(),
	}
	c.loop = workloop.New(ControllerName, c.sync, workloop.Config{Errors: opts.Errors, Metrics: opts.QueueMetrics})
	if err := indexes.Add(c.attInf, Indexes...); err != nil {
		return nil, err
	}
	synced, err := workloop.Register([]workloop.Watch{
		{Informer: c.attInf, Handler: c.loop.Handler()},
		{Informer: inf.ElasticIPs.Informer(), Handler: workloop.Funcs(c.onElasticIP)},
		{Informer: inf.NetworkInterfaces.Informer(), Handler: workloop.Funcs(c.onNIC)},
	})
	if err != nil {
		return nil, err
	}
	c.synced = synced
	return c, nil
}

// Run waits for the caches and runs workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.loop.Run(ctx, workers, c.synced...)
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
		c.loop.AddObject(a)
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
	merged.Conditions = status.Merge(att.Status.Conditions, merged.Conditions, metav1.NewTime(c.clock.Now()))
	if equality.Semantic.DeepEqual(merged, att.Status) {
		return nil
	}
	ready := meta.FindStatusCondition(merged.Conditions, v1alpha1.ConditionReady)
	_, err = c.client.JuneauV1alpha1().ElasticIPAttachments(namespace).ApplyStatus(ctx, statusApply(att, merged, ready),
		metav1.ApplyOptions{FieldManager: v1alpha1.FieldManagerController, Force: true})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing status of ElasticIPAttachment %s: %w", key, err)
	}
	klog.FromContext(ctx).V(2).Info("Wrote ElasticIPAttachment status", "elasticIPAttachment", klog.KObj(att),
		"phase", merged.Phase, "reason", ready.Reason)
	status.Announce(c.recorder, att, readyEvents, meta.FindStatusCondition(att.Status.Conditions, v1alpha1.ConditionReady), ready)
	return nil
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// statusApply is the apply configuration of the fields this controller owns; a field
// left out is removed. The UID keeps the write off a newer object of the same name.
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
	return applyv1alpha1.ElasticIPAttachment(att.Name, att.Namespace).WithUID(att.UID).WithStatus(sa)
}

// readyEvents: becoming Ready is Normal; a missing ElasticIP or NIC, or losing Ready,
// is a Warning; a new reason for waiting is Normal; the first waiting status of a new
// attachment is not announced.
var readyEvents = status.Policy{Quiet: metav1.ConditionFalse, WarnOnLoss: true}
