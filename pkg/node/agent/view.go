package agent

import (
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/listdiff"
	"github.com/loutres/juneau/pkg/node/nft"
)

// maxPatch is the most keys a sync patches into the views one by one: past it, they are
// rebuilt from the caches (a patch moves up to the whole list; a rebuild sorts it).
const maxPatch = 128

// views keep what Compute derives of the two kinds that grow with the cluster — the
// ElasticIPAttachments of every Node and this Node's ARPAdvertisements — sorted as
// Compute orders them (derived), patched at each sync from the objects the informers'
// events named since the last one. A sync after one change then costs what the change
// costs there, where deriving and sorting 100,000 of each took most of a sync
// (docs/performance.md#scale). They are rebuilt from the caches at every full sync and
// when a change is too large to patch. Compute derives the same when Inputs carries no
// view (TestViewsAgreeWithCompute). Used once Watch hands the agent its informers.
type views struct {
	// mu guards what the event handlers write: the keys of the attachments,
	// advertisements and ElasticIPs named since the last sync.
	mu                                    sync.Mutex
	on                                    bool
	dirtyAttachments, dirtyAds, dirtyEIPs map[string]struct{}

	// Read and written by the sync worker only.
	built bool
	d     derived
	// nat: by attachment key, its entry (attached ones only) and, for this Node's, the
	// key of its ElasticIP, whose limit is the entry's; ownByEIP: by ElasticIP key,
	// the keys of this Node's attachments of it (one, but in a conflict).
	nat      map[string]viewNAT
	ownByEIP map[string][]string
	// ads: by name, the candidate of each advertisement that is one.
	ads map[string]answeredAd
	// inClusterT and ownT follow the edits of d.inCluster and d.own, told to the NAT
	// programmer and its check with each version (derived.inClusterChange, ownChange);
	// adsT those of d.ads, told to Compute's answers (derived.adsChange).
	inClusterT, ownT, adsT listdiff.Tracker
}

type viewNAT struct {
	e   natEntry
	eip string
}

// event notes the object of an event (any of the agent's kinds, or a tombstone).
func (v *views) event(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	var set *map[string]struct{}
	switch obj.(type) {
	case *v1alpha1.ElasticIPAttachment:
		set = &v.dirtyAttachments
	case *v1alpha1.ARPAdvertisement:
		set = &v.dirtyAds
	case *v1alpha1.ElasticIP:
		set = &v.dirtyEIPs
	default:
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if *set == nil {
		*set = map[string]struct{}{}
	}
	(*set)[key] = struct{}{}
}

// enable starts the views: events flow from now on.
func (v *views) enable() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.on = true
}

// take returns and forgets the keys named since the last call, and whether the views
// are on.
func (v *views) take() (on bool, attachments, ads, eips map[string]struct{}) {
	v.mu.Lock()
	defer v.mu.Unlock()
	on, attachments, ads, eips = v.on, v.dirtyAttachments, v.dirtyAds, v.dirtyEIPs
	v.dirtyAttachments, v.dirtyAds, v.dirtyEIPs = nil, nil, nil
	return on, attachments, ads, eips
}

// update brings the views up to the caches (rebuilt when rebuild, or when too much
// changed) and returns them, or nil while they are off.
func (v *views) update(l Listers, node string, rebuild bool) (*derived, error) {
	on, attachments, ads, eips := v.take()
	if !on {
		return nil, nil
	}
	// The limits as Compute reads them, from the agent's cache.
	var limits ElasticIPSource
	if l.ElasticIPs != nil {
		limits = elasticIPLister{l.ElasticIPs}
	}
	bandwidth := (&Inputs{ElasticIPs: limits}).bandwidth
	// A changed ElasticIP changes the limit of this Node's attachments of it.
	for k := range eips {
		for _, a := range v.ownByEIP[k] {
			if attachments == nil {
				attachments = map[string]struct{}{}
			}
			attachments[a] = struct{}{}
		}
	}
	if rebuild || !v.built || len(attachments)+len(ads) > maxPatch {
		if err := v.rebuild(l, node, bandwidth); err != nil {
			return nil, err
		}
		return v.mark(), nil
	}
	for k := range attachments {
		ns, name, err := cache.SplitMetaNamespaceKey(k)
		if err != nil {
			continue
		}
		a, err := l.Attachments.ElasticIPAttachments(ns).Get(name)
		if err != nil && !apierrors.IsNotFound(err) {
			v.built = false // the keys taken are rebuilt next time
			return nil, err
		}
		var n viewNAT
		ok := false
		if a != nil {
			n, ok = v.natOf(a, node, bandwidth)
		}
		// A write that leaves the entry as it was (most status writes of the attachments
		// of every Node): nothing to move in lists of 100,000.
		if old, had := v.nat[k]; had && ok && old == n {
			continue
		}
		v.removeNAT(k)
		if ok {
			v.addNAT(k, n)
		}
	}
	for k := range ads {
		ad, err := l.Advertisements.Get(k)
		if err != nil && !apierrors.IsNotFound(err) {
			v.built = false
			return nil, err
		}
		var c answeredAd
		ok := false
		if ad != nil {
			c, ok = adCandidate(node, ad)
		}
		if old, had := v.ads[k]; had {
			// At the same address (an update of its status or labels), in its place.
			if ok {
				if i := replaceSorted(v.d.ads, old, c, byAnsweredAd); i >= 0 {
					v.ads[k] = c
					v.adsT.Replace(i, i+1, 1)
					continue
				}
			}
			delete(v.ads, k)
			var i int
			if v.d.ads, i = removeSorted(v.d.ads, old, byAnsweredAd); i >= 0 {
				v.adsT.Remove(i)
			}
		}
		if ok {
			v.ads[k] = c
			var i int
			v.d.ads, i = insertSorted(v.d.ads, c, byAnsweredAd)
			v.adsT.Insert(i)
		}
	}
	return v.mark(), nil
}

// mark ends a version of the mapping lists, and returns the views with their changes.
func (v *views) mark() *derived {
	v.d.inClusterChange, v.d.ownChange, v.d.adsChange = v.inClusterT.Mark(), v.ownT.Mark(), v.adsT.Mark()
	return &v.d
}

// rebuild derives the views from the caches.
func (v *views) rebuild(l Listers, node string, bandwidth func(namespace, name string) int32) error {
	v.built = false
	attachments, err := l.Attachments.List(labels.Everything())
	if err != nil {
		return err
	}
	ads, err := l.Advertisements.List(labels.Everything())
	if err != nil {
		return err
	}
	v.d = derived{inCluster: make([]nft.Mapping, 0, len(attachments))}
	v.nat = make(map[string]viewNAT, len(attachments))
	v.ownByEIP = make(map[string][]string, len(attachments))
	for _, a := range attachments {
		e, ok := v.natOf(a, node, bandwidth)
		if !ok {
			continue
		}
		v.d.inCluster = append(v.d.inCluster, e.e.m)
		if e.e.own {
			v.d.own = append(v.d.own, e.e.ownMapping())
		}
		v.note(a.Namespace+"/"+a.Name, e)
	}
	slices.SortFunc(v.d.inCluster, byMapping)
	slices.SortFunc(v.d.own, byMapping)
	v.inClusterT.Reset(len(v.d.inCluster))
	v.ownT.Reset(len(v.d.own))
	v.d.ads = make([]answeredAd, 0, len(ads))
	v.ads = make(map[string]answeredAd, len(ads))
	for _, ad := range ads {
		if c, ok := adCandidate(node, ad); ok {
			v.d.ads = append(v.d.ads, c)
			v.ads[ad.Name] = c
		}
	}
	slices.SortFunc(v.d.ads, byAnsweredAd)
	v.adsT.Reset(len(v.d.ads))
	v.built = true
	return nil
}

// natOf is the entry of an attachment, with its ElasticIP's key when it is this Node's.
func (v *views) natOf(a *v1alpha1.ElasticIPAttachment, node string, bandwidth func(namespace, name string) int32) (viewNAT, bool) {
	e, ok := natEntryOf(node, a, bandwidth)
	if !ok {
		return viewNAT{}, false
	}
	n := viewNAT{e: e}
	if e.own {
		n.eip = a.Namespace + "/" + a.Spec.ElasticIPRef.Name
	}
	return n, true
}

// note records the entry of the attachment at key.
func (v *views) note(key string, n viewNAT) {
	v.nat[key] = n
	if n.e.own {
		v.ownByEIP[n.eip] = append(v.ownByEIP[n.eip], key)
	}
}

// addNAT adds the entry n of the attachment at key.
func (v *views) addNAT(key string, n viewNAT) {
	v.note(key, n)
	var i int
	v.d.inCluster, i = insertSorted(v.d.inCluster, n.e.m, byMapping)
	v.inClusterT.Insert(i)
	if n.e.own {
		v.d.own, i = insertSorted(v.d.own, n.e.ownMapping(), byMapping)
		v.ownT.Insert(i)
	}
}

func (v *views) removeNAT(key string) {
	n, ok := v.nat[key]
	if !ok {
		return
	}
	delete(v.nat, key)
	var i int
	if v.d.inCluster, i = removeSorted(v.d.inCluster, n.e.m, byMapping); i >= 0 {
		v.inClusterT.Remove(i)
	}
	if n.e.own {
		if v.d.own, i = removeSorted(v.d.own, n.e.ownMapping(), byMapping); i >= 0 {
			v.ownT.Remove(i)
		}
		keys := slices.DeleteFunc(v.ownByEIP[n.eip], func(k string) bool { return k == key })
		if len(keys) == 0 {
			delete(v.ownByEIP, n.eip)
		} else {
			v.ownByEIP[n.eip] = keys
		}
	}
}

// insertSorted inserts x into s, sorted by cmp, after the elements equal to it, and
// returns where.
func insertSorted[T any](s []T, x T, cmp func(a, b T) int) ([]T, int) {
	i, _ := slices.BinarySearchFunc(s, x, func(e, t T) int {
		if c := cmp(e, t); c != 0 {
			return c
		}
		return -1 // past the equal ones
	})
	return slices.Insert(s, i, x), i
}

// replaceSorted puts x in the place of old in s, sorted by cmp, when cmp ties the two
// (the same place: nothing moves), and returns where (-1: it did not).
func replaceSorted[T comparable](s []T, old, x T, cmp func(a, b T) int) int {
	if cmp(old, x) != 0 {
		return -1
	}
	i, _ := slices.BinarySearchFunc(s, old, cmp)
	for ; i < len(s) && cmp(s[i], old) == 0; i++ {
		if s[i] == old {
			s[i] = x
			return i
		}
	}
	return -1
}

// removeSorted removes one element equal (==) to x from s, sorted by cmp, and returns
// where it was (-1: nowhere); elements that cmp ties with x are searched for it.
func removeSorted[T comparable](s []T, x T, cmp func(a, b T) int) ([]T, int) {
	i, _ := slices.BinarySearchFunc(s, x, cmp)
	for ; i < len(s) && cmp(s[i], x) == 0; i++ {
		if s[i] == x {
			return slices.Delete(s, i, i+1), i
		}
	}
	return s, -1
}
