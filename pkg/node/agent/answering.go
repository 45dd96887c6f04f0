package agent

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	applyv1alpha1 "github.com/loutres/juneau/pkg/generated/applyconfiguration/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/listdiff"
	"github.com/loutres/juneau/pkg/status"
)

// markAnswering writes the Answering condition on the advertisements this agent now
// answers for (True: answered, as Compute lists them in Desired) or refuses to (False,
// with why: refused), with server-side apply so it owns only that condition. It
// returns the advertisements whose condition it turned True. Of the answered ones it
// compares only those that differ from the answered list of the last sync that found
// every condition right (a.marked; listdiff): an advertisement whose cached object did
// not change since holds the condition found right then. A full sync (a.marked nil)
// compares every one, each with one condition made without an allocation.
func (a *Agent) markAnswering(ctx context.Context, in Inputs, answered []answeredAd, refused map[string]string) (started []string, err error) {
	todo := answered
	if a.marked != nil {
		w := a.answeredSince(a.marked, answered)
		todo = answered[w.Start:w.NewEnd]
	}
	a.marked = nil
	defer func() {
		if err == nil {
			a.marked = answered
		}
	}()
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
	if len(refused) > 0 {
		ads, err := in.AllAdvertisements()
		if err != nil {
			return started, err
		}
		for _, ad := range ads {
			if why, ok := refused[ad.Name]; ok {
				if err := mark(ad, refusedCondition(why, ad.Generation)); err != nil {
					return started, err
				}
			}
		}
	}
	answering := answeringConditions(a.cfg.ExternalInterface, a.cfg.ExternalMAC)
	for _, x := range todo {
		if err := mark(x.ad, answering(x.addr, x.ad.Generation)); err != nil {
			return started, err
		}
	}
	return started, nil
}

// answeredSince is where the answered list cur differs from prev (listdiff), the last
// answer remembered: markAnswering and logAnswering mostly compare the same two lists,
// 100,000 advertisements each.
func (a *Agent) answeredSince(prev, cur []answeredAd) listdiff.Window {
	if m := &a.lastWindow; m.valid && sameList(m.prev, prev) && sameList(m.cur, cur) {
		return m.w
	}
	a.lastWindow = answeredWindow{prev: prev, cur: cur, w: listdiff.Of(prev, cur), valid: true}
	return a.lastWindow.w
}

// answeredWindow is the last answer of answeredSince.
type answeredWindow struct {
	prev, cur []answeredAd
	w         listdiff.Window
	valid     bool
}

// sameList reports whether x and y are the same list in memory (not only equal).
func sameList(x, y []answeredAd) bool {
	return len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
}
