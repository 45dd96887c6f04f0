package elasticip

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/controllers/indexes"
	"github.com/loutres/juneau/pkg/workloop"
)

// echoes recognises the watch events of this process's own writes for an ElasticIP —
// the claim it created, the status it wrote — which carry nothing the sync that wrote
// them has not already used, so that they do not wake the ElasticIP again
// (docs/performance.md, "Row 1"). A routine allocation is then one sync, not three.
//
// An event is an echo only when the cache shows exactly the object this process wrote:
// the same kind, name and resourceVersion, which the API server changes with every
// write. Any other version — a write by someone else, an older object from a lagging
// cache, a relist — wakes the ElasticIP as before, and so do resyncs (an update to the
// same version). Each write is matched once. The watch may deliver the echo before the
// response to the write arrives: events for an ElasticIP that come while one of its
// writes is in flight are held until the write returns, and then the echo is dropped and
// any other event wakes the ElasticIP.
type echoes struct {
	mu sync.Mutex
	// inflight: by ElasticIP key, the events held while a write is in flight.
	inflight map[string][]echo
	// expect: by ElasticIP key and kind, the write whose event has not come yet.
	expect map[string]map[writeKind]echo
	// created: by consumer UID, the claim this process created and the informer has not
	// shown yet, so that a retry never reserves a second address (reserve).
	created map[types.UID]string
}

type writeKind int

const (
	statusWrite writeKind = iota
	claimWrite
)

// echo is one write, or one event, of an object: its kind, name and version.
type echo struct {
	kind          writeKind
	name, version string
}

func newEchoes() *echoes {
	return &echoes{inflight: map[string][]echo{}, expect: map[string]map[writeKind]echo{}, created: map[types.UID]string{}}
}

// begin marks a write for the ElasticIP at key as in flight. Every begin is followed
// by one end.
func (e *echoes) begin(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inflight[key] = []echo{}
}

// end closes the write begun for key: done is the object written (its version from the
// API server's answer), or nil when the write failed or its echo must wake the
// ElasticIP anyway. It says whether an event held meanwhile must wake the ElasticIP
// (one that is neither this write's echo nor that of an earlier write of the sync), and
// whether the write's echo was among them.
func (e *echoes) end(key string, done *echo) (wake, seen bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	held := e.inflight[key]
	delete(e.inflight, key)
	if done != nil {
		if e.expect[key] == nil {
			e.expect[key] = map[writeKind]echo{}
		}
		e.expect[key][done.kind] = *done
	}
	for _, ev := range held {
		seen = seen || (done != nil && ev == *done)
		if !e.matchLocked(key, ev) {
			wake = true
		}
	}
	return wake, seen
}

// isEcho says whether an event for the ElasticIP at key is the echo of one of this
// process's writes, or is held until the write in flight returns: in both cases it
// wakes nothing now.
func (e *echoes) isEcho(key string, ev echo) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if held, ok := e.inflight[key]; ok {
		e.inflight[key] = append(held, ev)
		return true
	}
	return e.matchLocked(key, ev)
}

// matchLocked matches an event against the write expected of its kind. A status event
// ends the memory of the status written, whatever its version (the watch delivers the
// versions of one object in order); a claim event ends it only for that claim.
func (e *echoes) matchLocked(key string, ev echo) bool {
	want, ok := e.expect[key][ev.kind]
	if !ok || (ev.kind == claimWrite && want.name != ev.name) {
		return false
	}
	delete(e.expect[key], ev.kind)
	if len(e.expect[key]) == 0 {
		delete(e.expect, key)
	}
	return want == ev
}

// forget drops what is remembered of a deleted ElasticIP's writes.
func (e *echoes) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.expect, key)
}

// createdClaim records a claim this process created for a consumer.
func (e *echoes) createdClaim(uid types.UID, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.created[uid] = name
}

// claimCreatedFor returns the name of the claim this process created for the consumer
// and the informer has not shown yet.
func (e *echoes) claimCreatedFor(uid types.UID) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	name, ok := e.created[uid]
	return name, ok
}

// claimShown forgets a created claim once the informer shows it.
func (e *echoes) claimShown(claim *v1alpha1.AllocationClaim) {
	uid := types.UID(claim.Spec.Consumer.UID)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.created[uid] == claim.Name {
		delete(e.created, uid)
	}
}

// eipHandler wakes the ElasticIP for every event but the echo of its own status write.
func (c *Controller) eipHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: c.eipLoop.AddObject,
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*v1alpha1.ElasticIP)
			n, ok2 := newObj.(*v1alpha1.ElasticIP)
			if ok1 && ok2 && o.ResourceVersion != n.ResourceVersion &&
				c.echoes.isEcho(indexes.Key(n.Namespace, n.Name), echo{kind: statusWrite, name: n.Name, version: n.ResourceVersion}) {
				return
			}
			c.eipLoop.AddObject(newObj)
		},
		DeleteFunc: func(obj any) {
			if eip, ok := workloop.Unwrap(obj).(*v1alpha1.ElasticIP); ok {
				c.echoes.forget(indexes.Key(eip.Namespace, eip.Name))
			}
			c.eipLoop.AddObject(obj)
		},
	}
}

// claimEcho says whether a claim the informer shows is the echo of this process's
// create for its consumer.
func (c *Controller) claimEcho(claim *v1alpha1.AllocationClaim) bool {
	consumer := claim.Spec.Consumer
	return consumer.Kind == v1alpha1.ConsumerKindElasticIP &&
		c.echoes.isEcho(indexes.Key(consumer.Namespace, consumer.Name), echo{kind: claimWrite, name: claim.Name, version: claim.ResourceVersion})
}

// written runs a write for the ElasticIP at key with the echo of that write recognised:
// write returns the object written (its name and version) and whether its echo may be
// dropped; an event held meanwhile that is not the echo wakes the ElasticIP. It says
// whether the echo has come already.
func (c *Controller) written(key string, kind writeKind, write func() (name, version string, quiet bool, err error)) (seen bool, err error) {
	c.echoes.begin(key)
	name, version, quiet, err := write()
	var done *echo
	if err == nil && quiet {
		done = &echo{kind: kind, name: name, version: version}
	}
	wake, seen := c.echoes.end(key, done)
	if wake {
		c.eipLoop.Add(key)
	}
	return seen, err
}

// sameHolder says whether two recorded holders are the same record (both nobody, or
// equal references).
func sameHolder(a, b *v1alpha1.AttachmentReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
