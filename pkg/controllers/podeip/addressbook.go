package podeip

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/indexes"
)

// PodByAllocatedAddress indexes Pods by the addresses their write-back annotations carry
// (juneau's allocated-eip-address of each family and the managed-cloud
// allocated-eipAddress).
const PodByAllocatedAddress = "juneau.pod.allocated-address"

// No two Pods carry one address in their write-back annotations (docs/automatic.md#one-elasticip-one-pod):
// before the controller writes an address on a Pod it takes it off every other Pod that
// carries it — those the cache shows (PodByAllocatedAddress) and those it wrote it on
// itself, which the cache may not show yet (addressBook) — and it writes each address
// under that address's lock, after checking again that the Pod still holds it. A Pod
// that lost its ElasticIP loses the annotations in its own sync too; this makes the
// order safe when both happen at once.

// addressBook remembers on which Pods (key and UID) this process wrote each address,
// until it takes it off them, and serializes the writes of one address. An address is
// on one Pod but in a race, so each holds a short list, not a map of its own: 108 bytes
// of heap per address instead of 378 (TestAddressBookMemory), held for every automatic
// ElasticIP.
type addressBook struct {
	seed  maphash.Seed
	locks [64]sync.Mutex
	mu    sync.Mutex
	pods  map[string][]carrier // address -> the Pods written, each key once
}

// carrier is a Pod an address was written on.
type carrier struct {
	key string
	uid types.UID
}

func newAddressBook() *addressBook {
	return &addressBook{seed: maphash.MakeSeed(), pods: map[string][]carrier{}}
}

// lock serializes the writes of the addresses; it returns the unlock. The stripes are
// taken in order, each once, so two writers never wait for each other in a circle.
func (b *addressBook) lock(addrs ...string) func() {
	var stripes []int
	for _, a := range addrs {
		stripes = append(stripes, int(maphash.String(b.seed, a)%uint64(len(b.locks))))
	}
	slices.Sort(stripes)
	stripes = slices.Compact(stripes)
	for _, i := range stripes {
		b.locks[i].Lock()
	}
	return func() {
		for _, i := range stripes {
			b.locks[i].Unlock()
		}
	}
}

func (b *addressBook) wrote(addr, pod string, uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cs := b.pods[addr]
	if i := slices.IndexFunc(cs, func(c carrier) bool { return c.key == pod }); i >= 0 {
		cs[i].uid = uid
		return
	}
	b.pods[addr] = append(cs, carrier{key: pod, uid: uid})
}

func (b *addressBook) erased(addr, pod string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cs := slices.DeleteFunc(b.pods[addr], func(c carrier) bool { return c.key == pod })
	if len(cs) == 0 {
		delete(b.pods, addr)
		return
	}
	b.pods[addr] = cs
}

// carriers are the Pods this process wrote the address on, in a map of the caller's.
func (b *addressBook) carriers(addr string) map[string]types.UID {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]types.UID{}
	for _, c := range b.pods[addr] {
		out[c.key] = c.uid
	}
	return out
}

// addAddressIndex registers PodByAllocatedAddress.
func addAddressIndex(informer cache.SharedIndexInformer) error {
	if _, ok := informer.GetIndexer().GetIndexers()[PodByAllocatedAddress]; ok {
		return nil
	}
	err := informer.AddIndexers(cache.Indexers{PodByAllocatedAddress: func(obj any) ([]string, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return nil, nil
		}
		return carriedAddresses(pod), nil
	}})
	if err != nil {
		return fmt.Errorf("adding Pod index: %w", err)
	}
	return nil
}

// carriedAddresses are the addresses the Pod's write-back annotations carry, each once.
func carriedAddresses(pod *corev1.Pod) []string {
	var out []string
	for _, k := range []string{v1alpha1.AnnotationAllocatedEIPAddr, v1alpha1.AnnotationAllocatedEIPAddr6, v1alpha1.AliasAllocatedEIPAddress} {
		if v := pod.Annotations[k]; v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// takeAddressFromOthers removes the write-back annotations from every Pod other than
// self that carries addr, in the cache or by this process's own writes. Call it under
// the address's lock.
func (c *Controller) takeAddressFromOthers(ctx context.Context, addr string, self *corev1.Pod) error {
	others := c.book.carriers(addr)
	pods, err := indexes.ByIndex[*corev1.Pod](c.podInf, PodByAllocatedAddress, addr)
	if err != nil {
		return err
	}
	for _, p := range pods {
		others[indexes.Key(p.Namespace, p.Name)] = p.UID
	}
	selfKey := indexes.Key(self.Namespace, self.Name)
	for key, uid := range others {
		if key == selfKey && uid == self.UID {
			continue
		}
		namespace, name, err := cache.SplitMetaNamespaceKey(key)
		if err != nil {
			continue
		}
		if cur, err := c.pods.Pods(namespace).Get(name); key == selfKey || err == nil && cur.UID != uid {
			// An earlier Pod of that name, gone: the Pod there now is this one, or
			// one the cache lists under its own UID when it carries the address.
			c.book.erased(addr, key)
			continue
		}
		if err := c.eraseAnnotations(ctx, namespace, name, uid); err != nil {
			return fmt.Errorf("taking address %s off Pod %s before writing it on Pod %s: %w", addr, key, selfKey, err)
		}
		c.book.erased(addr, key)
		klog.FromContext(ctx).V(2).Info("Took the address off another Pod first", "address", addr, "from", key)
	}
	return nil
}

// eraseAnnotations removes every write-back annotation of the Pod with that UID; a Pod
// that is gone or is another Pod now (the UID precondition fails) carries nothing of it.
func (c *Controller) eraseAnnotations(ctx context.Context, namespace, name string, uid types.UID) error {
	removed := map[string]any{}
	for _, k := range annotations.WrittenBack() {
		removed[k] = nil
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid, "annotations": removed}})
	if err != nil {
		return err
	}
	_, err = c.kube.CoreV1().Pods(namespace).Patch(ctx, name, types.MergePatchType, data,
		metav1.PatchOptions{FieldManager: v1alpha1.FieldManagerController})
	if benign(err) {
		return nil
	}
	return err
}
