// Package kube is the API-server source of the objects sluice routes by:
// client-go shared informers on Ingress, IngressClass, Service, EndpointSlice
// and TLS Secrets, the basic-authentication Secrets labelled
// translate.AuthSecretLabel=true, Pods (only their addresses, for the
// endpoint checks: pods.go), and optionally the Gateway API objects
// (gateway.go). (The proxy's own Pod, its drain condition and grace
// period, are watched by internal/drain.)
//
// Data flow: API server → informer caches (this package) → Snapshot →
// translate.Build → route.New → proxy.
//
// Permissions the proxy's ServiceAccount needs: list and watch on
// networking.k8s.io ingresses and ingressclasses, services, secrets (the
// watch asks only for type kubernetes.io/tls, but RBAC cannot express
// that), pods and discovery.k8s.io endpointslices, cluster-wide or, with
// Options.Namespaces, in each of those namespaces (IngressClasses always
// cluster-wide); get, list and watch on pods in its own namespace for
// internal/drain. With Options.Gateway also list and watch on
// gateway.networking.k8s.io gatewayclasses and namespaces (cluster-wide),
// gateways, httproutes, grpcroutes, referencegrants and, when the
// BackendTLSPolicy CRD is served, backendtlspolicies and configmaps (as
// Ingresses; of ConfigMaps only "ca.crt" is kept: backendtls.go).
//
// Unit tests use client-go's fake clientset. Tests against a real
// kube-apiserver carry the build tag e2e (e2e_test.go here) and come with the
// local-cluster work in test/e2e; they read the cluster's kubeconfig from
// SLUICE_KUBECONFIG and skip when it is unset.
package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/translate"
)

// lastAppliedAnnotation is written by kubectl apply and holds a full copy of
// the object; sluice never reads it.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// Options configure New.
type Options struct {
	// Client talks to the API server. Required.
	Client kubernetes.Interface
	// Namespaces limits Ingress, Service, EndpointSlice and Secret watches
	// to these namespaces (one set of informers each); empty watches all
	// namespaces. IngressClasses are cluster-scoped and always watched in
	// full.
	Namespaces []string
	// Logger receives watch errors; nil means slog.Default().
	Logger *slog.Logger
	// Gateway, when non-nil, also watches the Gateway API objects
	// (gateway.go): GatewayClasses cluster-wide, Gateways, HTTPRoutes and
	// ReferenceGrants in Namespaces, and Namespaces (for allowedRoutes
	// selectors). Nil watches none.
	Gateway gwclient.Interface
}

// Source keeps informer caches of the objects translate needs.
type Source struct {
	log       *slog.Logger
	factories []informers.SharedInformerFactory
	informers map[string]cache.SharedIndexInformer // by kind, for handlers and logs
	// podInformers are the Pod informers, by name as informers; their
	// handler notifies only for address changes (podHandler).
	podInformers map[string]cache.SharedIndexInformer
	pods         *podIndex

	// One lister of each namespaced kind per watched namespace.
	ingresses      []networkinglisters.IngressLister
	ingressClasses networkinglisters.IngressClassLister
	services       []corelisters.ServiceLister
	endpointSlices []discoverylisters.EndpointSliceLister
	secrets        []corelisters.SecretLister
	authSecrets    []corelisters.SecretLister // labelled translate.AuthSecretLabel

	gw *gatewayWatch // nil: Gateway API not watched

	started atomic.Bool
	synced  atomic.Bool
}

var _ source.Source = (*Source)(nil)

// New builds the informers. Nothing talks to the API server until Run.
func New(opts Options) (*Source, error) {
	if opts.Client == nil {
		return nil, errors.New("creating kube source: no client")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("source", "kube")

	s := &Source{log: log, informers: map[string]cache.SharedIndexInformer{},
		podInformers: map[string]cache.SharedIndexInformer{}, pods: &podIndex{namespaced: map[string]cache.Indexer{}}}
	// Each namespace once: a repeated one would list its objects twice.
	namespaces := slices.Compact(slices.Sorted(slices.Values(opts.Namespaces)))
	if len(namespaces) == 0 || slices.Contains(namespaces, metav1.NamespaceAll) {
		namespaces = []string{metav1.NamespaceAll}
	}
	for i, ns := range namespaces {
		// Resync period 0: a periodic resync only replays the cache and
		// would wake the translation loop for nothing. Recovering from
		// lost watches (API server restarts, expired resource versions) is
		// the reflector's relist, which runs regardless.
		main := informers.NewSharedInformerFactoryWithOptions(opts.Client, 0,
			informers.WithNamespace(ns),
			informers.WithTransform(StripObject))
		// Only TLS Secrets: a cluster holds many large Secrets (service
		// account tokens, Helm releases) that sluice never serves.
		tls := informers.NewSharedInformerFactoryWithOptions(opts.Client, 0,
			informers.WithNamespace(ns),
			informers.WithTransform(StripObject),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS)).String()
			}))
		// Basic-auth Secrets: only those labelled for it, so the proxy
		// holds no other Secret of a tenant.
		auth := informers.NewSharedInformerFactoryWithOptions(opts.Client, 0,
			informers.WithNamespace(ns),
			informers.WithTransform(StripObject),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.LabelSelector = translate.AuthSecretLabel + "=true"
			}))
		pods := newPodFactory(opts.Client, ns)
		s.factories = append(s.factories, main, tls, auth, pods)
		suffix := "" // informer names in logs: Ingress, or Ingress/NAMESPACE
		if len(namespaces) > 1 {
			suffix = "/" + ns
		}
		if i == 0 { // cluster-scoped: one informer, whatever the namespace
			cls := main.Networking().V1().IngressClasses()
			s.informers["IngressClass"] = cls.Informer()
			s.ingressClasses = cls.Lister()
		}
		ing := main.Networking().V1().Ingresses()
		svc := main.Core().V1().Services()
		eps := main.Discovery().V1().EndpointSlices()
		sec := tls.Core().V1().Secrets()
		s.informers["Ingress"+suffix] = ing.Informer()
		s.informers["Service"+suffix] = svc.Informer()
		s.informers["EndpointSlice"+suffix] = eps.Informer()
		s.informers["Secret"+suffix] = sec.Informer()
		s.ingresses = append(s.ingresses, ing.Lister())
		s.services = append(s.services, svc.Lister())
		s.endpointSlices = append(s.endpointSlices, eps.Lister())
		s.secrets = append(s.secrets, sec.Lister())
		authSec := auth.Core().V1().Secrets()
		s.informers["Secret(auth)"+suffix] = authSec.Informer()
		s.authSecrets = append(s.authSecrets, authSec.Lister())
		podInf := pods.Core().V1().Pods().Informer()
		s.podInformers["Pod"+suffix] = podInf
		if ns == metav1.NamespaceAll {
			s.pods.all = podInf.GetIndexer()
		} else {
			s.pods.namespaced[ns] = podInf.GetIndexer()
		}
	}
	if opts.Gateway != nil {
		s.gw = newGatewayWatch(opts.Client, opts.Gateway, namespaces, log)
	}
	return s, nil
}

// Run starts the informers, calls notify once every cache has synced and
// after every change afterwards, and stops the informers when ctx ends. It
// returns nil when ctx ends (also before the first sync) and an error only
// when it cannot start; it may be called once.
func (s *Source) Run(ctx context.Context, notify func()) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("running kube source: already running")
	}
	for kind, inf := range s.informers {
		log := s.log.With("kind", kind)
		if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, r *cache.Reflector, err error) {
			LogWatchError(log, err)
		}); err != nil {
			return fmt.Errorf("setting watch error handler for %s: %w", kind, err)
		}
		if _, err := inf.AddEventHandler(s.handler(notify)); err != nil {
			return fmt.Errorf("adding event handler for %s: %w", kind, err)
		}
	}
	for kind, inf := range s.podInformers {
		log := s.log.With("kind", kind)
		if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, r *cache.Reflector, err error) {
			LogWatchError(log, err)
		}); err != nil {
			return fmt.Errorf("setting watch error handler for %s: %w", kind, err)
		}
		if _, err := inf.AddEventHandler(s.podHandler(notify)); err != nil {
			return fmt.Errorf("adding event handler for %s: %w", kind, err)
		}
	}
	for _, f := range s.factories {
		f.StartWithContext(ctx)
	}
	defer func() {
		for _, f := range s.factories {
			f.Shutdown() // waits for the informer goroutines
		}
	}()

	var gwFirst chan struct{}
	if s.gw != nil {
		gwFirst = make(chan struct{})
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			s.gw.run(ctx, s.handler(notify), notify, gwFirst)
		}()
	}
	for _, f := range s.factories {
		if res := f.WaitForCacheSyncWithContext(ctx); res.Err != nil {
			return nil // ctx ended before the first sync
		}
	}
	if gwFirst != nil {
		select {
		case <-gwFirst:
		case <-ctx.Done():
			return nil
		}
	}
	// Set before notifying: events that arrived between the caches syncing
	// and now were not notified, but the Snapshot this notify leads to
	// already holds them.
	s.synced.Store(true)
	s.log.Info("caches synced")
	notify()
	<-ctx.Done()
	return nil
}

// handler calls notify for every change once the first load is done.
// Updates that do not change the resource version (the replays a relist
// produces after a lost watch) are not changes.
func (s *Source) handler(notify func()) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) {
			if s.synced.Load() {
				notify()
			}
		},
		UpdateFunc: func(old, cur any) {
			if !s.synced.Load() || sameVersion(old, cur) {
				return
			}
			notify()
		},
		DeleteFunc: func(any) {
			if s.synced.Load() {
				notify()
			}
		},
	}
}

// Synced reports whether every informer has finished its first list.
func (s *Source) Synced() bool { return s.synced.Load() }

// Snapshot lists every cache. Each list is consistent in itself; the lists
// are read one after another, so a change landing in between shows up in
// one list and not yet in another, and is followed by another notify.
func (s *Source) Snapshot() translate.Input {
	var in translate.Input
	in.IngressClasses, _ = s.ingressClasses.List(labels.Everything())
	for i := range s.ingresses {
		ings, _ := s.ingresses[i].List(labels.Everything())
		svcs, _ := s.services[i].List(labels.Everything())
		eps, _ := s.endpointSlices[i].List(labels.Everything())
		in.Ingresses = append(in.Ingresses, ings...)
		in.Services = append(in.Services, svcs...)
		in.EndpointSlices = append(in.EndpointSlices, eps...)
		secrets, _ := s.secrets[i].List(labels.Everything())
		// The field selector already filters on the server; this keeps the
		// promise also against clients that ignore it (the fake clientset).
		for _, sec := range secrets {
			if sec.Type == corev1.SecretTypeTLS {
				in.Secrets = append(in.Secrets, sec)
			}
		}
		authSecrets, _ := s.authSecrets[i].List(labels.Everything())
		for _, sec := range authSecrets {
			if sec.Type != corev1.SecretTypeTLS && sec.Labels[translate.AuthSecretLabel] == "true" {
				in.Secrets = append(in.Secrets, sec)
			}
		}
	}
	// The live Pod caches, not a copy: a Pod that arrives during the build
	// is seen or not, and its notify leads to another build.
	in.Pods = s.pods
	if s.gw != nil {
		s.gw.snapshot(&in)
	}
	return in
}

// StripObject drops the fields sluice never reads and that can be most of an
// object's size. It mutates in place (allowed for informer transforms) and is
// idempotent.
func StripObject(obj any) (any, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil // e.g. cache.DeletedFinalStateUnknown
	}
	m.SetManagedFields(nil)
	if a := m.GetAnnotations(); a != nil {
		if _, ok := a[lastAppliedAnnotation]; ok {
			delete(a, lastAppliedAnnotation)
			m.SetAnnotations(a)
		}
	}
	return obj, nil
}

func sameVersion(old, cur any) bool {
	o, err1 := meta.Accessor(old)
	c, err2 := meta.Accessor(cur)
	if err1 != nil || err2 != nil {
		return false
	}
	return o.GetResourceVersion() != "" && o.GetResourceVersion() == c.GetResourceVersion()
}

// LogWatchError replaces client-go's default handler (which logs through
// klog). The reflector backs off and relists after it returns either way.
func LogWatchError(log *slog.Logger, err error) {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, context.Canceled):
		// A watch closed normally, or the source is stopping.
	case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
		log.Debug("watch expired; relisting", "err", err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		log.Info("watch closed unexpectedly; relisting", "err", err)
	default:
		log.Warn("watching failed; retrying", "err", err)
	}
}
