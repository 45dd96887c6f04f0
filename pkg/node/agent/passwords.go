package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// Passwords reads the TCP-MD5 passwords of the BGPPeers selecting this Node. It keeps
// one informer per Secret they name, each watching that one Secret by name: the agent
// is granted its Secrets one by one (resourceNames, docs/bgp.md#passwords), and a list
// or watch selected by metadata.name is authorized against them. Informers start when a
// Secret is first wanted and stop when no BGPPeer names it any more.
type Passwords struct {
	kube     kubernetes.Interface
	resync   time.Duration
	onChange func()

	mu      sync.Mutex
	ctx     context.Context // set by run; nil before
	watches map[types.NamespacedName]*secretWatch
	wg      sync.WaitGroup
}

type secretWatch struct {
	factory  kubeinformers.SharedInformerFactory
	informer cache.SharedIndexInformer
	stop     chan struct{}

	mu      sync.Mutex
	lastErr error // the last list or watch failure, until the cache syncs
}

// NewPasswords makes a Passwords; onChange is called when a Secret it watches changes
// or cannot be read. It starts nothing.
func NewPasswords(kube kubernetes.Interface, resync time.Duration, onChange func()) *Passwords {
	return &Passwords{kube: kube, resync: resync, onChange: onChange, watches: map[types.NamespacedName]*secretWatch{}}
}

// start lets Want start informers until ctx ends; stop then stops them all. start is
// called before the first sync, so the first Want already starts its informers.
func (p *Passwords) start(ctx context.Context) {
	p.mu.Lock()
	p.ctx = ctx
	p.mu.Unlock()
}

// stop waits for ctx of start to end, then stops every informer.
func (p *Passwords) stop() {
	p.mu.Lock()
	ctx := p.ctx
	p.mu.Unlock()
	if ctx != nil {
		<-ctx.Done()
	}
	p.mu.Lock()
	for name, w := range p.watches {
		p.stopWatch(w)
		delete(p.watches, name)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// Want watches exactly these Secrets.
func (p *Passwords) Want(secrets []types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx == nil || p.ctx.Err() != nil {
		return
	}
	want := map[types.NamespacedName]bool{}
	for _, s := range secrets {
		want[s] = true
		if _, ok := p.watches[s]; !ok {
			p.watches[s] = p.startWatch(s)
		}
	}
	for s, w := range p.watches {
		if !want[s] {
			p.stopWatch(w)
			delete(p.watches, s)
		}
	}
}

func (p *Passwords) startWatch(s types.NamespacedName) *secretWatch {
	w := &secretWatch{stop: make(chan struct{})}
	w.factory = kubeinformers.NewSharedInformerFactoryWithOptions(p.kube, p.resync, kubeinformers.WithNamespace(s.Namespace),
		kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", s.Name).String()
		}))
	w.informer = w.factory.Core().V1().Secrets().Informer()
	_ = w.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		w.mu.Lock()
		w.lastErr = err
		w.mu.Unlock()
		p.onChange()
	})
	changed := func(any) { p.onChange() }
	_, _ = w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: changed, UpdateFunc: func(_, o any) { changed(o) }, DeleteFunc: changed,
	})
	w.factory.Start(w.stop)
	// Once synced, say so: the Secret may not exist, so no event would.
	p.wg.Go(func() {
		if cache.WaitForCacheSync(w.stop, w.informer.HasSynced) {
			p.onChange()
		}
	})
	return w
}

func (p *Passwords) stopWatch(w *secretWatch) {
	close(w.stop)
	p.wg.Go(w.factory.Shutdown)
}

// Password returns the password ref names: ErrPasswordPending until the Secret's cache
// has synced (or its reading failed), an error naming the Secret when it does not exist,
// cannot be read or lacks the key.
func (p *Passwords) Password(ref v1alpha1.SecretKeyReference) (string, error) {
	name := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	p.mu.Lock()
	w, ok := p.watches[name]
	p.mu.Unlock()
	if !ok {
		return "", ErrPasswordPending
	}
	if !w.informer.HasSynced() {
		w.mu.Lock()
		err := w.lastErr
		w.mu.Unlock()
		if err == nil {
			return "", ErrPasswordPending
		}
		return "", fmt.Errorf("Secret %q: %w", name.String(), err)
	}
	obj, exists, err := w.informer.GetStore().GetByKey(name.String())
	if err != nil {
		return "", fmt.Errorf("Secret %q: %w", name.String(), err)
	}
	if !exists {
		return "", fmt.Errorf("Secret %q does not exist", name.String())
	}
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return "", fmt.Errorf("Secret %q: unexpected object %T", name.String(), obj)
	}
	value, ok := secret.Data[ref.Key]
	if !ok {
		return "", fmt.Errorf("Secret %q has no key %q", name.String(), ref.Key)
	}
	return string(value), nil
}
