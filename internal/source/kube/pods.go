package kube

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"sluice.dev/sluice/internal/translate"
)

// Pods are watched so that translation can compare an endpoint's address
// with the Pod its targetRef names (translate.Input.Pods): a targetRef is
// only a claim, written by whoever may write EndpointSlices. The cache
// keeps of each Pod only what that needs, in a small type of its own
// (StripPod, cachedPod): a few hundred bytes a Pod, against several
// kilobytes for a whole Pod (TestPodCacheSize measures both).

// newPodFactory is the informer factory of the Pods of namespace ns ("":
// all), with StripPod as its transform.
func newPodFactory(client kubernetes.Interface, ns string) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(ns),
		informers.WithTransform(StripPod))
}

// cachedPod is what the Pod cache holds of a Pod: its identity, resource
// version (for the informer), spec.hostNetwork and status.podIPs. A
// corev1.Pod, even empty, takes 1.2 kB; this takes about 300 bytes.
type cachedPod struct {
	metav1.TypeMeta
	metav1.ObjectMeta // namespace, name, UID, resourceVersion only
	HostNetwork       bool
	IPs               []string // status.podIPs, in order
}

// DeepCopyObject implements runtime.Object.
func (p *cachedPod) DeepCopyObject() runtime.Object {
	c := *p
	c.ObjectMeta = *p.ObjectMeta.DeepCopy()
	c.IPs = slices.Clone(p.IPs)
	return &c
}

var _ metav1.Object = (*cachedPod)(nil)

// StripPod turns a Pod into a cachedPod, so the cache holds none of the
// rest (containers, environment, conditions, managed fields). Other
// objects, and cachedPods, pass unchanged.
func StripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a cachedPod, or e.g. cache.DeletedFinalStateUnknown
	}
	c := &cachedPod{
		ObjectMeta:  metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion},
		HostNetwork: p.Spec.HostNetwork,
		IPs:         make([]string, len(p.Status.PodIPs)),
	}
	for i, ip := range p.Status.PodIPs {
		c.IPs[i] = ip.IP
	}
	return c, nil
}

// podIndex is translate.PodAddresses over the Pod caches, one per watched
// namespace (or one for all). It reads the live caches: safe for
// concurrent use, and a build sees each Pod as it is at the lookup.
type podIndex struct {
	all        cache.Indexer            // every namespace; nil when per namespace
	namespaced map[string]cache.Indexer // by namespace
}

var _ translate.PodAddresses = (*podIndex)(nil)

// PodIPs implements translate.PodAddresses.
func (x *podIndex) PodIPs(namespace, name string) ([]string, bool) {
	idx := x.all
	if idx == nil {
		idx = x.namespaced[namespace]
	}
	if idx == nil {
		return nil, false
	}
	obj, ok, err := idx.GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	p, ok := obj.(*cachedPod)
	if !ok {
		return nil, false
	}
	return p.IPs, true // shared with the cache: callers only read it
}

// podHandler calls notify, once the first load is done, only for the
// Pod changes translation can see: a Pod with addresses added or
// deleted, or its addresses changed. Every other Pod update (status
// conditions, container restarts: the most frequent changes in a
// cluster) wakes nothing.
func (s *Source) podHandler(notify func()) cache.ResourceEventHandler {
	return addressHandler(&s.synced, notify)
}

// addressHandler is podHandler for a cache whose first load is done once
// synced is true.
func addressHandler(synced *atomic.Bool, notify func()) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if synced.Load() && len(podIPs(obj)) > 0 {
				notify()
			}
		},
		UpdateFunc: func(old, cur any) {
			if synced.Load() && !slices.Equal(podIPs(old), podIPs(cur)) {
				notify()
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if synced.Load() && (len(podIPs(obj)) > 0 || obj == nil) {
				notify()
			}
		},
	}
}

// PodWatch is the Pod address cache alone, cluster-wide, for a caller
// that translates without a Source: the controller's problems reconciler,
// whose Events must say what the proxies do.
type PodWatch struct {
	log     *slog.Logger
	factory informers.SharedInformerFactory
	inf     cache.SharedIndexInformer
	index   *podIndex
	synced  atomic.Bool
}

var _ translate.PodAddresses = (*PodWatch)(nil)

// NewPodWatch builds the watch; nothing talks to the API server until Run.
// logger nil means slog.Default().
func NewPodWatch(client kubernetes.Interface, logger *slog.Logger) *PodWatch {
	if logger == nil {
		logger = slog.Default()
	}
	f := newPodFactory(client, metav1.NamespaceAll)
	inf := f.Core().V1().Pods().Informer()
	return &PodWatch{log: logger.With("kind", "Pod"), factory: f, inf: inf, index: &podIndex{all: inf.GetIndexer()}}
}

// Run watches until ctx ends, calling notify after the first load and
// after every address change (as podHandler). It returns nil when ctx
// ends and an error only when it cannot start; it may be called once.
func (w *PodWatch) Run(ctx context.Context, notify func()) error {
	if err := w.inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		LogWatchError(w.log, err)
	}); err != nil {
		return fmt.Errorf("setting watch error handler for Pods: %w", err)
	}
	if _, err := w.inf.AddEventHandler(addressHandler(&w.synced, notify)); err != nil {
		return fmt.Errorf("adding event handler for Pods: %w", err)
	}
	w.factory.StartWithContext(ctx)
	defer w.factory.Shutdown()
	if res := w.factory.WaitForCacheSyncWithContext(ctx); res.Err != nil {
		return nil
	}
	w.synced.Store(true)
	notify()
	<-ctx.Done()
	return nil
}

// Synced reports whether the first list is done: before, every Pod is
// unknown and every endpoint would be refused.
func (w *PodWatch) Synced() bool { return w.synced.Load() }

// PodIPs implements translate.PodAddresses.
func (w *PodWatch) PodIPs(namespace, name string) ([]string, bool) {
	return w.index.PodIPs(namespace, name)
}

// podIPs returns a cached Pod's addresses; nil for anything else.
func podIPs(obj any) []string {
	if p, ok := obj.(*cachedPod); ok {
		return p.IPs
	}
	return nil
}
