package attachment

import (
	"fmt"
	"net/netip"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/holder"
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
	if nic != nil {
		st.PodIP = vpcAddress(nic)
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

// vpcAddress is the Pod IP of a NIC that carries no ElasticIP: its status.address
// without the "/32". A NIC that carries an ElasticIP directly has no Pod IP to
// translate to (NAT and direct use exclude each other), so it gives none.
func vpcAddress(nic *v1alpha1.NetworkInterface) string {
	if nic.Spec.ElasticIP != "" || nic.Status.Address == "" {
		return ""
	}
	if p, err := netip.ParsePrefix(nic.Status.Address); err == nil {
		return p.Addr().String()
	}
	if a, err := netip.ParseAddr(nic.Status.Address); err == nil {
		return a.String()
	}
	return ""
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
