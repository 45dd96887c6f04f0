package holder

import (
	"fmt"
	"slices"
	"strings"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// A user of an ElasticIP, worded for messages that tell a Pod (or its author) why it
// cannot have the ElasticIP: the webhook's refusal and the controller's condition on a
// waiting Pod say it the same way (docs/automatic.md#one-elasticip-one-pod).

// AttachmentUser describes an ElasticIPAttachment that uses an ElasticIP by NAT, with
// the Pod it serves when known ("" otherwise): `Pod "nginx" (through
// ElasticIPAttachment "nginx-eip-attach")`, or `ElasticIPAttachment "a" (to
// NetworkInterface "x.eth0")`.
func AttachmentUser(a *v1alpha1.ElasticIPAttachment, pod string) string {
	if pod != "" {
		return fmt.Sprintf("Pod %q (through ElasticIPAttachment %q)", pod, a.Name)
	}
	return fmt.Sprintf("ElasticIPAttachment %q (to NetworkInterface %q)", a.Name, a.Spec.TargetRef.NetworkInterfaceName)
}

// DirectUser describes a NetworkInterface that carries the ElasticIP itself.
func DirectUser(nic *v1alpha1.NetworkInterface) string {
	return fmt.Sprintf("Pod %q (directly, NetworkInterface %q)", nic.Spec.PodRef.Name, nic.Name)
}

// PodOf is the Pod an ElasticIPAttachment serves as far as the attachment itself says:
// the Pod an automatic attachment was made for (its label juneau.loutres.me/pod), else
// the Pod of its target NetworkInterface "<pod>.<interface>".
func PodOf(a *v1alpha1.ElasticIPAttachment) string {
	if p := a.Labels[v1alpha1.LabelPod]; p != "" {
		return p
	}
	if i := strings.LastIndexByte(a.Spec.TargetRef.NetworkInterfaceName, '.'); i > 0 {
		return a.Spec.TargetRef.NetworkInterfaceName[:i]
	}
	return ""
}

// InUse says that the ElasticIP is used by the users (AttachmentUser, DirectUser),
// sorted: `ElasticIP "nginx-eip" is used by Pod "nginx" (through ElasticIPAttachment
// "nginx-eip-attach")`.
func InUse(eip string, users []string) string {
	users = slices.Clone(users)
	slices.Sort(users)
	return fmt.Sprintf("ElasticIP %q is used by %s", eip, strings.Join(users, "; "))
}
