package agent

import (
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// echoMemory is how long a write is remembered while its watch event has not come
// (the object was deleted first, or a relist folded the event into another).
const echoMemory = 10 * time.Minute

// handler triggers a sync for every event that may change what a sync does. Not for an
// update that changes nothing the caches keep (sameButVersion: a Node's heartbeat, its
// status trimmed away by cached.Node), nor for the echo of the agent's own write (an
// Answering or Announced condition, a readiness gate): a sync still walks the Node's
// whole state (50 ms at 100,000 mappings), and the watch of every write the agent made
// would otherwise start one more (docs/performance.md#scale). Every event is told to
// the views first, those that start no sync too.
func (a *Agent) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			a.views.event(obj)
			a.Trigger()
		},
		UpdateFunc: func(old, cur any) {
			// The views take the new object even when it starts no sync: it is
			// the one the next sync writes on.
			a.views.event(cur)
			if sameButVersion(old, cur) {
				a.metrics.ignoredUpdate(ignoredUnchanged)
				return
			}
			switch a.echoes.event(cur) {
			case echoed:
				a.metrics.ignoredUpdate(ignoredOwnWrite)
			case news:
				a.Trigger()
			}
		},
		DeleteFunc: func(obj any) {
			a.views.event(obj)
			a.Trigger()
		},
	}
}

// sameButVersion reports whether two versions of an object are equal in everything but
// their resourceVersion and managedFields, which no sync reads.
func sameButVersion(old, cur any) bool {
	o, c := reflect.ValueOf(old), reflect.ValueOf(cur)
	if o.Kind() != reflect.Pointer || o.Type() != c.Type() || o.IsNil() || c.IsNil() || o.Elem().Kind() != reflect.Struct {
		return false
	}
	// Shallow copies: their maps and slices are the cached objects', only read.
	oc, cc := reflect.New(o.Type().Elem()), reflect.New(c.Type().Elem())
	oc.Elem().Set(o.Elem())
	cc.Elem().Set(c.Elem())
	om, err1 := meta.Accessor(oc.Interface())
	cm, err2 := meta.Accessor(cc.Interface())
	if err1 != nil || err2 != nil {
		return false
	}
	for _, m := range []metav1.Object{om, cm} {
		m.SetResourceVersion("")
		m.SetManagedFields(nil)
	}
	return equality.Semantic.DeepEqual(oc.Interface(), cc.Interface())
}

// echoes recognises the watch events of the agent's own writes. An update event is an
// echo when the cache shows exactly an object the agent wrote: the same namespace,
// name and resourceVersion, which the API server changes with every write; it carries
// nothing the sync that wrote it did not decide, so it starts no sync. Any other
// version — someone else's write, a relist — triggers one as before. The watch may
// deliver an echo before the write's response: events that come while a sync runs are
// held until it ends, and those that are not echoes of its writes then trigger one
// sync. Each write is matched once.
type echoes struct {
	mu      sync.Mutex
	syncing bool
	// held: the versions of the update events that came during the sync.
	held []version
	// written: the versions written whose event has not come, and when.
	written map[version]time.Time
}

// version is one version of an object.
type version struct{ namespace, name, resourceVersion string }

func versionOf(m metav1.Object) version {
	return version{m.GetNamespace(), m.GetName(), m.GetResourceVersion()}
}

// begin marks the start of a sync.
func (e *echoes) begin() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.syncing = true
}

// wrote records an object as the API server returned it after the agent's write.
func (e *echoes) wrote(m metav1.Object, now time.Time) {
	if m.GetResourceVersion() == "" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.written == nil {
		e.written = map[version]time.Time{}
	}
	e.written[versionOf(m)] = now
}

// matchLocked reports whether v is the echo of a write, forgetting the write.
func (e *echoes) matchLocked(v version) bool {
	if _, ok := e.written[v]; ok {
		delete(e.written, v)
		return true
	}
	return false
}

// What an update event is (echoes.event).
type eventKind int

const (
	// news: not an echo; it needs a sync.
	news eventKind = iota
	// echoed: the echo of a write.
	echoed
	// held: it came during a sync, and waits for its end.
	held
)

// event tells what the update event of cur is.
func (e *echoes) event(cur any) eventKind {
	m, err := meta.Accessor(cur)
	if err != nil {
		return news
	}
	v := versionOf(m)
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.matchLocked(v):
		return echoed
	case e.syncing:
		e.held = append(e.held, v)
		return held
	}
	return news
}

// end marks the end of a sync at now. It reports whether an event held during it was
// not an echo, so that another sync must follow, and how many were echoes. Writes
// older than echoMemory are forgotten.
func (e *echoes) end(now time.Time) (wake bool, echoes int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.syncing = false
	for _, v := range e.held {
		if e.matchLocked(v) {
			echoes++
		} else {
			wake = true
		}
	}
	e.held = nil
	for v, at := range e.written {
		if now.Sub(at) > echoMemory {
			delete(e.written, v)
		}
	}
	return wake, echoes
}
