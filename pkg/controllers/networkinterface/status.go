package networkinterface

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/directnic"
	"github.com/loutres/juneau/pkg/apis/juneau/holder"
	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/podaddr"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// nicStatus computes the status of a NIC from its Pod and, for a direct NIC, from the
// decision the ElasticIP controller published in the ElasticIP's status, read through
// package holder (this controller never re-derives it). pod and eip may be nil when
// they do not exist. The Ready condition carries no lastTransitionTime: status.Merge keeps
// the recorded one unless the condition's status flips.
func nicStatus(nic *v1alpha1.NetworkInterface, pod *corev1.Pod, eip *v1alpha1.ElasticIP) v1alpha1.NetworkInterfaceStatus {
	if nic.Spec.ElasticIP == "" {
		return vpcStatus(nic, pod)
	}
	return directStatus(nic, eip)
}

// vpcStatus is the status of a NIC that carries no ElasticIP: its address is the Pod IP
// (IPv4 when the Pod has one, else IPv6), and addresses lists the Pod's address of each
// family, so that an attachment translates an ElasticIP to the one of its family.
// Only eth0's addresses are known: the primary CNI's status.podIPs says nothing about the
// other interfaces of the Pod, so an extra NIC without an ElasticIP stays without an
// address and is Ready as soon as the Pod has its IP (its sandbox network is up).
func vpcStatus(nic *v1alpha1.NetworkInterface, pod *corev1.Pod) v1alpha1.NetworkInterfaceStatus {
	ips := podaddr.OfPod(pod)
	if len(ips) == 0 && pod != nil && string(pod.UID) == nic.Spec.PodRef.UID {
		// The kubelet reports the IPs at its next look at the Pod, up to a second or
		// more after its sandbox got them; the node agent wrote them from the CNI ADD.
		// The status is the same either way, so the kubelet's report changes nothing.
		ips = podaddr.FirstPerFamily(nic.Status.SandboxAddresses)
	}
	if len(ips) == 0 {
		return pending(nic, v1alpha1.ReasonWaitingForPodIP,
			fmt.Sprintf("Pod %q has no IP address yet", nic.Spec.PodRef.Name))
	}
	if nic.Spec.PodRef.Interface != v1alpha1.DefaultInterface {
		return ready(nic, v1alpha1.NetworkInterfaceStatus{},
			fmt.Sprintf("Pod %q has its address; the address of an extra interface without an ElasticIP is not tracked", nic.Spec.PodRef.Name))
	}
	st := v1alpha1.NetworkInterfaceStatus{}
	for _, ip := range ips {
		st.Addresses = append(st.Addresses, netip.PrefixFrom(ip, ip.BitLen()).String())
	}
	st.Address = st.Addresses[0]
	what := "address " + st.Address
	if len(ips) > 1 {
		what = "addresses " + strings.Join(st.Addresses, ", ")
	}
	return ready(nic, st, fmt.Sprintf("%s of Pod %q", what, nic.Spec.PodRef.Name))
}

// directStatus is the status of a NIC that names an ElasticIP: it has the address only
// while the ElasticIP's status.attachment names this very NIC (by UID). It is Failed
// where it can never get there (docs/reference.md#networkinterface): it was made after
// its Pod's network was set up, so it was never plumbed; or its ElasticIP is being
// deleted and does not name it, so it is handed to this NIC never.
func directStatus(nic *v1alpha1.NetworkInterface, eip *v1alpha1.ElasticIP) v1alpha1.NetworkInterfaceStatus {
	name := nic.Spec.ElasticIP
	if nic.Spec.CreatedAfterPodNetwork {
		return failed(nic, v1alpha1.ReasonPodNetworkAlreadySetUp, fmt.Sprintf(
			"made after the network of Pod %q was set up (its annotations named ElasticIP %q only later), so it was never plumbed: re-create the Pod to use the ElasticIP",
			nic.Spec.PodRef.Name, name))
	}
	if eip == nil {
		return pending(nic, v1alpha1.ReasonElasticIPNotReady, fmt.Sprintf("ElasticIP %q does not exist", name))
	}
	self := holder.Ref(v1alpha1.AttachmentKindNetworkInterface, nic.Name, nic.UID)
	if eip.DeletionTimestamp != nil && !holder.Is(eip.Status.Attachment, self) {
		return failed(nic, v1alpha1.ReasonElasticIPDeleting, fmt.Sprintf(
			"ElasticIP %q is being deleted and is handed to no new NetworkInterface: re-create the Pod with another ElasticIP", name))
	}
	if msg := holder.WaitingFor(eip, self); msg != "" {
		reason := v1alpha1.ReasonWaitingForElasticIP
		if eip.Status.Address == "" {
			reason = v1alpha1.ReasonElasticIPNotReady
		}
		return pending(nic, reason, msg)
	}
	addr, err := netip.ParseAddr(eip.Status.Address)
	if err != nil || addr.Is4In6() || addr.Zone() != "" {
		return pending(nic, v1alpha1.ReasonElasticIPNotReady,
			fmt.Sprintf("ElasticIP %q has no usable address (%q)", name, eip.Status.Address))
	}
	st := v1alpha1.NetworkInterfaceStatus{Address: iprange.HostPrefix(addr).String()}
	st.Routes, st.Rules = directRouting(nic.Spec.PodRef.Interface, addr)
	return ready(nic, st, fmt.Sprintf("holds ElasticIP %q (%s)", name, addr))
}

// directRouting is what the CNI plugin plumbs inside the Pod, published in the NIC's
// status (package directnic owns it). The table of an extra NIC with an IPv6 ElasticIP
// is settled among the Pod's NICs by the CNI plugin when it plumbs them all
// (directnic.RouteTables): such a NIC publishes no routes, and the plugin plumbs the
// ones directnic gives it (docs/reference.md#direct-nics).
func directRouting(iface string, addr netip.Addr) ([]v1alpha1.Route, []v1alpha1.RoutingRule) {
	primary := iface == v1alpha1.DefaultInterface
	if addr.Is6() && !primary {
		return nil, nil
	}
	return directnic.Routing(primary, addr, directnic.RouteTable(addr))
}

func pending(nic *v1alpha1.NetworkInterface, reason, message string) v1alpha1.NetworkInterfaceStatus {
	return v1alpha1.NetworkInterfaceStatus{
		Phase:      v1alpha1.NetworkInterfacePending,
		Conditions: []metav1.Condition{readyCondition(nic, metav1.ConditionFalse, reason, message)},
	}
}

func failed(nic *v1alpha1.NetworkInterface, reason, message string) v1alpha1.NetworkInterfaceStatus {
	return v1alpha1.NetworkInterfaceStatus{
		Phase:      v1alpha1.NetworkInterfaceFailed,
		Conditions: []metav1.Condition{readyCondition(nic, metav1.ConditionFalse, reason, message)},
	}
}

func ready(nic *v1alpha1.NetworkInterface, st v1alpha1.NetworkInterfaceStatus, message string) v1alpha1.NetworkInterfaceStatus {
	st.Phase = v1alpha1.NetworkInterfaceReady
	st.Conditions = []metav1.Condition{readyCondition(nic, metav1.ConditionTrue, v1alpha1.ReasonReady, message)}
	return st
}

func readyCondition(nic *v1alpha1.NetworkInterface, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{
		Type:               v1alpha1.ConditionReady,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: nic.Generation,
	}
}
