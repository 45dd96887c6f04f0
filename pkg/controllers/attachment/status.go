package attachment

import (
	"fmt"
	"net/netip"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/holder"
	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/podaddr"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// attachmentStatus computes an ElasticIPAttachment's status from its ElasticIP and its
// target NetworkInterface (nil when missing). It reads the ElasticIP controller's
// decision through package holder and never re-derives it. podIP and nodeName are filled
// whenever the NIC exists, even while waiting: the ElasticIP controller reads nodeName
// to place the ARPAdvertisement. The Ready condition carries no lastTransitionTime.
func attachmentStatus(att *v1alpha1.ElasticIPAttachment, eip *v1alpha1.ElasticIP, nic *v1alpha1.NetworkInterface) v1alpha1.ElasticIPAttachmentStatus {
	eipName, nicName := att.Spec.ElasticIPRef.Name, att.Spec.TargetRef.NetworkInterfaceName
	var st v1alpha1.ElasticIPAttachmentStatus
	if eip != nil {
		st.ElasticIP = eip.Status.Address
	}
	family := eipFamily(eip)
	var other []string // the NIC's addresses of the other family
	if nic != nil {
		st.PodIP, other = vpcAddress(nic, family)
		st.NodeName = nic.Spec.NodeName
	}

	switch {
	case eip == nil && nic == nil:
		return withReady(att, st, v1alpha1.AttachmentError, v1alpha1.ReasonMissingElasticIP,
			fmt.Sprintf("ElasticIP %q and NetworkInterface %q do not exist", eipName, nicName))
	case eip == nil:
		return withReady(att, st, v1alpha1.AttachmentError, v1alpha1.ReasonMissingElasticIP,
			fmt.Sprintf("ElasticIP %q does not exist", eipName))
	case nic == nil:
		return withReady(att, st, v1alpha1.AttachmentError, v1alpha1.ReasonMissingNetworkInterface,
			fmt.Sprintf("NetworkInterface %q does not exist", nicName))
	}
	if st.PodIP == "" && len(other) > 0 {
		return withReady(att, st, v1alpha1.AttachmentError, v1alpha1.ReasonAddressFamilyMismatch, fmt.Sprintf(
			"ElasticIP %q is %s but Pod %q of NetworkInterface %q has no %s address (only %s): an ElasticIP is translated to the Pod's address of its own family, never to another (no NAT64); use an ElasticIP of spec.ipFamily %s or a Pod with an %s address",
			eipName, family, nic.Spec.PodRef.Name, nicName, family, strings.Join(other, ", "), otherFamily(family), family))
	}
	self := holder.Ref(v1alpha1.AttachmentKindElasticIPAttachment, att.Name, att.UID)
	if msg := holder.WaitingFor(eip, self); msg != "" {
		return withReady(att, st, v1alpha1.AttachmentPending, v1alpha1.ReasonWaitingForElasticIP, msg)
	}
	if msg := waitingForNIC(nic, st); msg != "" {
		return withReady(att, st, v1alpha1.AttachmentPending, v1alpha1.ReasonWaitingForNetworkInterface, msg)
	}
	return withReady(att, st, v1alpha1.AttachmentAttached, v1alpha1.ReasonAttached,
		fmt.Sprintf("ElasticIP %q (%s) is translated to %s of NetworkInterface %q on Node %q",
			eipName, st.ElasticIP, st.PodIP, nicName, st.NodeName))
}

// eipFamily is the family of the ElasticIP: that of its address once it has one, of
// spec.ipFamily before.
func eipFamily(eip *v1alpha1.ElasticIP) v1alpha1.IPFamily {
	if eip == nil {
		return v1alpha1.IPv4
	}
	if a, err := netip.ParseAddr(eip.Status.Address); err == nil {
		if a.Unmap().Is4() {
			return v1alpha1.IPv4
		}
		return v1alpha1.IPv6
	}
	return eip.Spec.Family()
}

func otherFamily(f v1alpha1.IPFamily) v1alpha1.IPFamily {
	if f == v1alpha1.IPv6 {
		return v1alpha1.IPv4
	}
	return v1alpha1.IPv6
}

// vpcAddress is the Pod IP of family of a NIC that carries no ElasticIP (podaddr), and
// the NIC's addresses of the other family. A NIC that carries an ElasticIP directly has
// no Pod IP to translate to (NAT and direct use exclude each other), so it gives none.
func vpcAddress(nic *v1alpha1.NetworkInterface, family v1alpha1.IPFamily) (podIP string, other []string) {
	if nic.Spec.ElasticIP != "" {
		return "", nil
	}
	if a, ok := podaddr.OfFamily(nic, family); ok {
		podIP = a.String()
	}
	for _, a := range podaddr.Of(nic) {
		if iprange.FamilyOf(a) != podaddr.Family(family) {
			other = append(other, a.String())
		}
	}
	return podIP, other
}

// waitingForNIC says what the attachment waits for on the NIC's side, "" when the NIC
// has a Pod IP and a Node.
func waitingForNIC(nic *v1alpha1.NetworkInterface, st v1alpha1.ElasticIPAttachmentStatus) string {
	if nic.Spec.ElasticIP != "" {
		return fmt.Sprintf("NetworkInterface %q carries ElasticIP %q directly; NAT needs a NetworkInterface without one",
			nic.Name, nic.Spec.ElasticIP)
	}
	var missing []string
	if st.PodIP == "" {
		missing = append(missing, "address")
	}
	if st.NodeName == "" {
		missing = append(missing, "Node")
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("NetworkInterface %q has no %s yet", nic.Name, strings.Join(missing, " and no "))
}

func withReady(att *v1alpha1.ElasticIPAttachment, st v1alpha1.ElasticIPAttachmentStatus, phase v1alpha1.AttachmentPhase, reason, message string) v1alpha1.ElasticIPAttachmentStatus {
	status := metav1.ConditionFalse
	if phase == v1alpha1.AttachmentAttached {
		status = metav1.ConditionTrue
	}
	st.Phase = phase
	st.Conditions = []metav1.Condition{{
		Type:               v1alpha1.ConditionReady,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: att.Generation,
	}}
	return st
}
