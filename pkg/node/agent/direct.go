package agent

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/holder"
	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/cniserver"
)

// DirectSource tells the CNI plugin which direct NICs a Pod of this Node has, from the
// agent's Pod and NetworkInterface caches (both field-selected to this Node) and its
// ElasticIP cache.
type DirectSource struct {
	Pods corelisters.PodLister
	NICs listers.NetworkInterfaceLister
	// ElasticIPs confirms the holder: a NIC holds its ElasticIP only while the
	// ElasticIP's status names that very NIC (by UID). Nil trusts the NIC's status alone.
	ElasticIPs listers.ElasticIPLister
	Synced     func() bool
}

// holdsDirectly reports whether a direct NIC holds its ElasticIP: Ready with an address,
// and named by the ElasticIP's status.attachment as that very object, by UID
// (docs/reference.md#holder). The NIC's status follows the ElasticIP's decision;
// reading both keeps a NIC whose status lags behind it from counting.
func holdsDirectly(nic *v1alpha1.NetworkInterface, eip *v1alpha1.ElasticIP) bool {
	return nic.Status.Phase == v1alpha1.NetworkInterfaceReady && nic.Status.Address != "" && eip != nil &&
		holder.Is(eip.Status.Attachment, holder.Ref(v1alpha1.AttachmentKindNetworkInterface, nic.Name, nic.UID))
}

var _ cniserver.Source = (*DirectSource)(nil)

// DirectInterfaces reports every NIC the Pod's annotations ask to carry an ElasticIP,
// also before its NetworkInterface exists, so a Pod never starts without its address.
func (s *DirectSource) DirectInterfaces(namespace, pod string, uid types.UID) ([]cniserver.Interface, error) {
	if s.Synced != nil && !s.Synced() {
		return nil, cniserver.ErrNotReady
	}
	p, err := s.Pods.Pods(namespace).Get(pod)
	if apierrors.IsNotFound(err) || err == nil && uid != "" && p.UID != uid {
		return nil, cniserver.ErrPodUnknown
	}
	if err != nil {
		return nil, err
	}
	wanted, errs := annotations.ParseDirect(p.Annotations)
	if len(errs) > 0 {
		return nil, fmt.Errorf("Pod %s/%s has unreadable juneau annotations: %s", namespace, pod, messages.OfErrors(errs))
	}
	var out []cniserver.Interface
	for _, w := range wanted {
		if w.ElasticIP == "" {
			continue
		}
		out = append(out, s.status(p.Namespace, p.Name, p.UID, w))
	}
	return out, nil
}

func (s *DirectSource) status(namespace, pod string, uid types.UID, w annotations.DirectNIC) cniserver.Interface {
	name := v1alpha1.NetworkInterfaceName(pod, w.Interface)
	out := cniserver.Interface{Interface: w.Interface, ElasticIP: w.ElasticIP}
	nic, err := s.NICs.NetworkInterfaces(namespace).Get(name)
	if err != nil || nic.Spec.PodRef.UID != string(uid) {
		out.Waiting = fmt.Sprintf("NetworkInterface %q is not created yet", name)
		return out
	}
	if nic.Spec.ElasticIP != w.ElasticIP {
		out.Waiting = fmt.Sprintf("NetworkInterface %q names ElasticIP %q, not %q as the annotations now say: re-create the Pod",
			name, nic.Spec.ElasticIP, w.ElasticIP)
		return out
	}
	out.Holds = nic.Status.Address != "" && nic.Status.Phase == v1alpha1.NetworkInterfaceReady
	if out.Holds && s.ElasticIPs != nil {
		eip, err := s.ElasticIPs.ElasticIPs(namespace).Get(w.ElasticIP)
		if err != nil || !holdsDirectly(nic, eip) {
			out.Holds = false
			out.Waiting = fmt.Sprintf("ElasticIP %q does not name NetworkInterface %q (UID %q) as its holder yet", w.ElasticIP, name, nic.UID)
			return out
		}
	}
	out.Address = nic.Status.Address
	out.Routes, out.Rules = nic.Status.Routes, nic.Status.Rules
	if !out.Holds {
		var why string
		if c := meta.FindStatusCondition(nic.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			why = c.Message
		}
		out.Waiting = cniserver.NotHeldMessage(name, w.ElasticIP, why)
	}
	return out
}
