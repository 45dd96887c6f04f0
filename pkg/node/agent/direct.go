package agent

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	listers "github.com/loutres/juneau/pkg/generated/listers/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/cniserver"
)

// DirectSource tells the CNI plugin which direct NICs a Pod of this Node has, from the
// agent's Pod and NetworkInterface caches (both field-selected to this Node).
type DirectSource struct {
	Pods   corelisters.PodLister
	NICs   listers.NetworkInterfaceLister
	Synced func() bool
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
		return nil, fmt.Errorf("Pod %s/%s has unreadable juneau annotations: %w", namespace, pod, errs.ToAggregate())
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
	out.Holds = nic.Status.Address != "" && nic.Status.Phase == v1alpha1.NetworkInterfaceReady
	out.Address = nic.Status.Address
	out.Routes, out.Rules = nic.Status.Routes, nic.Status.Rules
	if !out.Holds {
		out.Waiting = fmt.Sprintf("NetworkInterface %q does not hold ElasticIP %q", name, w.ElasticIP)
		if c := meta.FindStatusCondition(nic.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Message != "" {
			out.Waiting += ": " + c.Message
		}
	}
	return out
}
