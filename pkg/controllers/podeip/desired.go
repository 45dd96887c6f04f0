package podeip

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// podState is where a Pod stands for its automatic ElasticIP.
type podState int

const (
	// podGone: the Pod object does not exist.
	podGone podState = iota
	// podFinished: the Pod Succeeded or Failed.
	podFinished
	// podNotAsking: the Pod runs but asks for no automatic ElasticIP (any more).
	podNotAsking
	// podHolding: the Pod is terminating, or its request cannot be acted on; what
	// exists stays as it is.
	podHolding
	// podActive: the Pod asks for an ElasticIP and should have it.
	podActive
)

// leaving says the Pod's attachment goes and its ElasticIP follows its release strategy.
func (s podState) leaving() bool { return s == podGone || s == podFinished || s == podNotAsking }

// problem is something the user should hear about: a Warning Event on Object.
type problem struct {
	Object  runtime.Object
	Reason  string
	Message string
}

// classify reads the Pod. A Pod that is terminating keeps everything until it is gone
// (docs/reference.md#automatic: release happens once the Pod is gone); one whose annotations cannot be read
// or that uses the host network (it has no NetworkInterface to translate to) keeps what
// it has, and nothing is guessed.
func classify(pod *corev1.Pod) (podState, annotations.AutoEIP, *problem) {
	switch {
	case pod == nil:
		return podGone, annotations.AutoEIP{}, nil
	case pod.Status.Phase == corev1.PodSucceeded, pod.Status.Phase == corev1.PodFailed:
		return podFinished, annotations.AutoEIP{}, nil
	case pod.DeletionTimestamp != nil:
		return podHolding, annotations.AutoEIP{}, nil
	case !annotations.HasJuneauAnnotations(pod.Annotations):
		return podNotAsking, annotations.AutoEIP{}, nil // most Pods: nothing to parse
	}
	if errs := annotations.ValidatePod(pod.Annotations); len(errs) > 0 {
		return podHolding, annotations.AutoEIP{}, &problem{Object: pod, Reason: v1alpha1.EventInvalidAnnotations,
			Message: "No ElasticIP is allocated or attached while the annotations cannot be read: " + messages.OfErrors(errs)}
	}
	auto, _ := annotations.ParseAuto(pod.Annotations)
	switch {
	case !auto.Wanted():
		return podNotAsking, auto, nil
	case pod.Spec.HostNetwork:
		return podHolding, auto, &problem{Object: pod, Reason: v1alpha1.EventHostNetwork,
			Message: "The Pod uses the host network: it has no NetworkInterface an ElasticIP could be attached to"}
	}
	return podActive, auto, nil
}

// chooseNetwork picks the ExternalNetwork an ElasticIP is created from: the one the Pod
// names, or the single one annotated as the default.
func chooseNetwork(pod *corev1.Pod, explicit string, networks []*v1alpha1.ExternalNetwork) (string, *problem) {
	if explicit != "" {
		i := slices.IndexFunc(networks, func(n *v1alpha1.ExternalNetwork) bool { return n.Name == explicit })
		switch {
		case i < 0:
			return "", &problem{Object: pod, Reason: v1alpha1.EventExternalNetworkNotFound, Message: fmt.Sprintf(
				"ExternalNetwork %q (annotation %s) does not exist; waiting for it", explicit, v1alpha1.AnnotationEIPExternalNetwork)}
		case networks[i].DeletionTimestamp != nil:
			return "", &problem{Object: pod, Reason: v1alpha1.EventExternalNetworkNotFound, Message: fmt.Sprintf(
				"ExternalNetwork %q (annotation %s) is being deleted", explicit, v1alpha1.AnnotationEIPExternalNetwork)}
		}
		return explicit, nil
	}
	defaults := annotations.DefaultNetworks(networks)
	switch len(defaults) {
	case 1:
		return defaults[0], nil
	case 0:
		return "", &problem{Object: pod, Reason: v1alpha1.EventNoDefaultNetwork, Message: fmt.Sprintf(
			"No ExternalNetwork is annotated %s: \"true\" and the Pod names none in %s; waiting for one",
			v1alpha1.AnnotationDefaultNetwork, v1alpha1.AnnotationEIPExternalNetwork)}
	}
	return "", &problem{Object: pod, Reason: v1alpha1.EventAmbiguousDefaultNetwork, Message: fmt.Sprintf(
		"%d ExternalNetworks are annotated %s: \"true\" (%s); mark exactly one, or name one in %s",
		len(defaults), v1alpha1.AnnotationDefaultNetwork, messages.Names(defaults), v1alpha1.AnnotationEIPExternalNetwork)}
}

// labelledFor says the object was made for the Pod of that name. Without the label an
// object is the user's and is never taken over, changed or deleted.
func labelledFor(obj metav1.Object, pod string) bool {
	return obj.GetLabels()[v1alpha1.LabelPod] == pod
}

// podOwnerRef is the controller reference to the Pod that Follow ElasticIPs and every
// attachment carry: it records which Pod (by UID) they were made for. It does not block
// the Pod's deletion: a Pod never waits for its ElasticIP.
func podOwnerRef(pod *corev1.Pod) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}
}

func isPodRef(r metav1.OwnerReference, name string) bool {
	return r.APIVersion == "v1" && r.Kind == "Pod" && r.Name == name
}

// ownedByEarlierPod says the object was made for an earlier Pod of the same name.
func ownedByEarlierPod(obj metav1.Object, pod *corev1.Pod) bool {
	for _, r := range obj.GetOwnerReferences() {
		if isPodRef(r, pod.Name) && r.UID != pod.UID {
			return true
		}
	}
	return false
}

// withPodOwner returns refs without references to Pods of that name, plus the
// reference to pod when it is given.
func withPodOwner(refs []metav1.OwnerReference, name string, pod *corev1.Pod) []metav1.OwnerReference {
	out := slices.DeleteFunc(slices.Clone(refs), func(r metav1.OwnerReference) bool { return isPodRef(r, name) })
	if pod != nil {
		ref := podOwnerRef(pod)
		if slices.ContainsFunc(out, func(r metav1.OwnerReference) bool { return r.Controller != nil && *r.Controller }) {
			ref.Controller = nil // only one controller reference is allowed
		}
		out = append(out, ref)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
