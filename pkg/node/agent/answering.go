package agent

import (
	"context"
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/status"
)

// markAnswering writes the Answering condition on the advertisements this agent now
// answers for (True: answered, as Compute lists them in Desired) or refuses to (False,
// with why: refused), with server-side apply so it owns only that condition. It
// returns the advertisements whose condition it turned True. It compares the answered
// advertisements it is given (sync gives those that changed since a sync that found
// every condition right), each with one condition made without an allocation.
func (a *Agent) markAnswering(ctx context.Context, in Inputs, answered []answeredAd, refused map[string]string) ([]string, error) {
	var started []string
	w := status.ARPAdvertisements(a.client, v1alpha1.FieldManagerNode, nil)
	w.Wrote = a.wrote
	now := metav1.NewTime(a.cfg.Clock.Now())
	mark := func(ad *v1alpha1.ARPAdvertisement, want metav1.Condition) error {
		cur, changed := status.One(ad.Status.Conditions, want, now)
		if !changed {
			return nil
		}
		apply := applyv1alpha1.ARPAdvertisement(ad.Name).WithStatus(applyv1alpha1.ARPAdvertisementStatus().WithConditions(status.Apply(cur)))
		asked := a.cfg.Clock.Now()
		written, err := w.Write(ctx, ad, apply, ad.Status.Conditions, []metav1.Condition{cur}, "answering", cur.Status)
		a.waitedSince(asked)
		switch {
		case err != nil:
			return err
		case !written:
			// deleted since the cache saw it; its deletion reaches the cache next
		case cur.Status != metav1.ConditionTrue:
			klog.FromContext(ctx).Info("Not answering ARP", "advertisement", klog.KObj(ad), "address", ad.Spec.Address, "reason", cur.Reason, "message", cur.Message)
		default:
			started = append(started, ad.Name)
		}
		return nil
	}
	// Each refused one looked up by name: listing 100,000 advertisements at every sync
	// for the two of a subnet's reserved addresses was a sync's largest cost.
	for _, name := range slices.Sorted(maps.Keys(refused)) {
		if ad := a.advertisement(in, name); ad != nil {
			if err := mark(ad, refusedCondition(refused[name], ad.Generation)); err != nil {
				return started, err
			}
		}
	}
	answering := answeringConditions(a.cfg.ExternalInterface, a.cfg.ExternalMAC)
	for _, x := range answered {
		if err := mark(x.ad, answering(x.addr, x.ad.Generation)); err != nil {
			return started, err
		}
	}
	return started, nil
}
