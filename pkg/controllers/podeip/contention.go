package podeip

import (
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/apis/juneau/holder"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/indexes"
)

// One ElasticIP, one Pod (docs/automatic.md#one-elasticip-one-pod). Pods naming the same
// ElasticIP in pod-eip-name can be admitted together (the webhook checks each against
// what exists, and neither has an attachment yet); the controller then gives the
// ElasticIP to exactly one of them: it creates an attachment only for an ElasticIP that
// nobody else uses — no other active ElasticIPAttachment, no NetworkInterface carrying it
// directly — and that it has not just given to another Pod whose attachment the cache
// does not show yet (assignments). The others wait, told why, and the first of them to
// sync after the user goes takes the ElasticIP over.

// assignee is a Pod an ElasticIP was given to, by key and UID.
type assignee struct {
	pod, name string // key and name
	uid       types.UID
}

// assignments remember, per ElasticIP ("<namespace>/<name>"), the Pod this process gave it
// to while the attachment it created is not in the cache yet: two workers syncing two
// Pods that name one free ElasticIP read the same cache, and only this memory tells the
// second that the first took it. An entry goes once the Pod's own sync finds its
// attachment in the cache (the cache then says it), or when the Pod leaves or the
// create fails.
type assignments struct {
	mu    sync.Mutex
	byEIP map[string]assignee
}

func newAssignments() *assignments { return &assignments{byEIP: map[string]assignee{}} }

// take gives the ElasticIP to who unless it was given to another Pod or othersNow (read
// under the lock, from the cache) finds another user. It reports whether who has it.
func (a *assignments) take(eip string, who assignee, othersNow func() bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cur, ok := a.byEIP[eip]; ok && cur != who {
		return false
	}
	if othersNow() {
		return false
	}
	a.byEIP[eip] = who
	return true
}

// givenTo returns the Pod the ElasticIP was given to, if any.
func (a *assignments) givenTo(eip string) (assignee, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	who, ok := a.byEIP[eip]
	return who, ok
}

// forget drops what was given to the Pod key (any UID), except the ElasticIPs keep.
func (a *assignments) forget(pod string, keep ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for eip, who := range a.byEIP {
		if who.pod == pod && !slices.Contains(keep, eip) {
			delete(a.byEIP, eip)
		}
	}
}

// release drops the entry of the ElasticIP if it names who.
func (a *assignments) release(eip string, who assignee) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byEIP[eip] == who {
		delete(a.byEIP, eip)
	}
}

// isOwnAttachment reports whether the attachment is the one the controller makes for a
// slot of the Pod: of the slot's name and labelled for the Pod.
func isOwnAttachment(a *v1alpha1.ElasticIPAttachment, name, pod string) bool {
	return a.Name == name && labelledFor(a, pod)
}

// otherUsers describes who else uses the ElasticIP the Pod wants (holder.InUse wording):
// the users the cache shows (cachedOthers), and a Pod this process just gave it to.
// Empty: nobody; the Pod may have it.
func (c *Controller) otherUsers(namespace, pod string, uid types.UID, eip string) ([]string, error) {
	users, err := c.cachedOthers(namespace, pod, eip)
	if err != nil {
		return nil, err
	}
	if who, ok := c.assigned.givenTo(indexes.Key(namespace, eip)); ok && (who.pod != indexes.Key(namespace, pod) || who.uid != uid) {
		users = append(users, fmt.Sprintf("Pod %q (its ElasticIPAttachment is being created)", who.name))
	}
	slices.Sort(users)
	return slices.Compact(users), nil
}

// cachedOthers describes the users of the ElasticIP the cache shows, other than the Pod
// of that name: active ElasticIPAttachments other than the Pod's own, and
// NetworkInterfaces carrying it directly.
func (c *Controller) cachedOthers(namespace, pod, eip string) ([]string, error) {
	key := indexes.Key(namespace, eip)
	atts, err := indexes.ByIndex[*v1alpha1.ElasticIPAttachment](c.attInf, indexes.AttachmentByElasticIP, key)
	if err != nil {
		return nil, err
	}
	var users []string
	for _, a := range atts {
		if a.DeletionTimestamp == nil && !labelledFor(a, pod) {
			users = append(users, holder.AttachmentUser(a, holder.PodOf(a)))
		}
	}
	nics, err := indexes.ByIndex[*v1alpha1.NetworkInterface](c.nicInf, indexes.NICByElasticIP, key)
	if err != nil {
		return nil, err
	}
	for _, n := range nics {
		if !n.Spec.CreatedAfterPodNetwork {
			users = append(users, holder.DirectUser(n))
		}
	}
	slices.Sort(users)
	return users, nil
}

// olderAttachment reports whether another active attachment of the ElasticIP is older
// than the Pod's own (by creation, then name): two attachments of one ElasticIP are a
// conflict nobody's traffic survives, and the younger gives way.
func olderAttachment(own *v1alpha1.ElasticIPAttachment, atts []*v1alpha1.ElasticIPAttachment) bool {
	for _, a := range atts {
		if a.UID == own.UID || a.DeletionTimestamp != nil {
			continue
		}
		if a.CreationTimestamp.Before(&own.CreationTimestamp) ||
			a.CreationTimestamp.Equal(&own.CreationTimestamp) && a.Name < own.Name {
			return true
		}
	}
	return false
}

// assigneeOf is the Pod as an assignee.
func assigneeOf(pod *corev1.Pod) assignee {
	return assignee{pod: indexes.Key(pod.Namespace, pod.Name), name: pod.Name, uid: pod.UID}
}
