package kube

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gwinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"
	gwlisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	"sluice.dev/sluice/internal/translate"

	"sluice.dev/sluice/internal/gateway"
)

// gatewayWatch holds the Gateway API informers (and the Namespace informer
// their allowedRoutes selectors need). They start only once the API server
// serves every kind of gateway.Resources: a cluster without the CRDs is told
// once in the log, and checked again every crdPoll until they appear. The
// GRPCRoute and BackendTLSPolicy CRDs are optional: without them the other
// kinds are watched, and they are looked for every crdPoll too, their
// informers added once they appear (no restart).
type gatewayWatch struct {
	log       *slog.Logger
	disco     discovery.DiscoveryInterface
	poll      time.Duration
	factories []gwinformers.SharedInformerFactory
	core      informers.SharedInformerFactory
	informers map[string]cache.SharedIndexInformer

	classes  gwlisters.GatewayClassLister
	gateways []gwlisters.GatewayLister
	routes   []gwlisters.HTTPRouteLister
	// grpcRoutes: nil until GRPCRoutes are served and their caches synced.
	grpcRoutes atomic.Pointer[[]gwlisters.GRPCRouteLister]
	grants     []gwlisters.ReferenceGrantLister
	namespaces corelisters.NamespaceLister
	// backendTLS: nil until BackendTLSPolicies are served and their
	// caches synced (backendtls.go).
	backendTLS    atomic.Pointer[backendTLSListers]
	client        kubernetes.Interface
	namespaceList []string
	cmFactories   []informers.SharedInformerFactory
	// registered: the informers with the event handler (registerNew).
	registered map[string]bool

	synced atomic.Bool
}

// crdPoll is how often a source without the Gateway API CRDs looks again.
const crdPoll = 30 * time.Second

func newGatewayWatch(client kubernetes.Interface, gw gwclient.Interface, namespaces []string, log *slog.Logger) *gatewayWatch {
	w := &gatewayWatch{log: log.With("api", "gateway"), disco: client.Discovery(), poll: crdPoll,
		informers: map[string]cache.SharedIndexInformer{}, registered: map[string]bool{}, client: client, namespaceList: namespaces}
	w.core = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(StripObject))
	ns := w.core.Core().V1().Namespaces()
	w.informers["Namespace"] = ns.Informer()
	w.namespaces = ns.Lister()
	for i, n := range namespaces {
		f := gwinformers.NewSharedInformerFactoryWithOptions(gw, 0, gwinformers.WithNamespace(n), gwinformers.WithTransform(StripObject))
		w.factories = append(w.factories, f)
		suffix := ""
		if len(namespaces) > 1 {
			suffix = "/" + n
		}
		v1 := f.Gateway().V1()
		if i == 0 {
			c := v1.GatewayClasses()
			w.informers["GatewayClass"] = c.Informer()
			w.classes = c.Lister()
		}
		g, r, rg := v1.Gateways(), v1.HTTPRoutes(), v1.ReferenceGrants()
		w.informers["Gateway"+suffix] = g.Informer()
		w.informers["HTTPRoute"+suffix] = r.Informer()
		w.informers["ReferenceGrant"+suffix] = rg.Informer()
		w.gateways = append(w.gateways, g.Lister())
		w.routes = append(w.routes, r.Lister())
		w.grants = append(w.grants, rg.Lister())
	}
	return w
}

// installed reports whether the API server serves every watched kind.
func (w *gatewayWatch) installed() (bool, error) { return gateway.Served(w.disco) }

// run waits for the CRDs, starts the informers and waits for their first
// list. It closes first once the first check found no CRDs, or once the
// caches synced: the source's first table then holds the Gateway API
// objects (a new proxy must not turn ready without them). CRDs that appear
// later are watched from then on, with a notify once synced. run returns
// when ctx ends, after stopping the informers.
func (w *gatewayWatch) run(ctx context.Context, handler cache.ResourceEventHandler, notify func(), first chan<- struct{}) {
	told := false
	for {
		ok, err := w.installed()
		if ok {
			break
		}
		if !told {
			if err != nil {
				w.log.Warn("cannot tell whether the Gateway API CRDs are installed; Gateway API objects are not served until they are found", "err", err, "recheck", w.poll)
			} else {
				w.log.Warn("the Gateway API CRDs (gateway.networking.k8s.io/v1 GatewayClass, Gateway, HTTPRoute, ReferenceGrant) are not installed; Gateway API objects are not served until they are", "recheck", w.poll)
			}
			told = true
			close(first)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.poll):
		}
	}
	var grpc []gwlisters.GRPCRouteLister
	if gateway.GRPCRoutesServed(w.disco) {
		grpc = w.grpcInformers()
	}
	var tls *backendTLSListers
	if gateway.BackendTLSPoliciesServed(w.disco) {
		tls = w.tlsInformers() // backendtls.go
	}
	w.registerNew(handler)
	defer func() {
		for _, f := range w.allFactories() {
			f.Shutdown()
		}
	}()
	for _, f := range w.allFactories() {
		f.StartWithContext(ctx)
	}
	for _, f := range w.allFactories() {
		if res := f.WaitForCacheSyncWithContext(ctx); res.Err != nil {
			return
		}
	}
	var late []lateKind
	if grpc != nil {
		w.grpcRoutes.Store(&grpc)
	} else {
		late = append(late, lateKind{"GRPCRoutes", gateway.GRPCRoutesServed, func() func() {
			l := w.grpcInformers()
			return func() { w.grpcRoutes.Store(&l) }
		}})
	}
	if tls != nil {
		w.backendTLS.Store(tls)
	} else {
		late = append(late, lateKind{"BackendTLSPolicies", gateway.BackendTLSPoliciesServed, func() func() {
			l := w.tlsInformers()
			return func() { w.backendTLS.Store(l) }
		}})
	}
	w.synced.Store(true)
	w.log.Info("Gateway API caches synced")
	if told {
		notify()
	} else {
		close(first)
	}
	for _, k := range late {
		w.log.Info(k.name+" are not served by the API server; they are read once they are", "recheck", w.poll)
	}
	w.awaitLate(ctx, handler, notify, late)
	<-ctx.Done()
}

// lateKind is an optional kind the API server did not serve when the
// watch started.
type lateKind struct {
	name   string // plural, for the log
	served func(gateway.Discovery) bool
	// add adds its informers (to w.informers, and factories if it needs
	// more) and returns what makes snapshot read them, called once their
	// caches synced.
	add func() (publish func())
}

// awaitLate looks every poll whether the API server serves the late
// kinds; for each that it does, it starts their informers and, once
// their caches synced, has snapshot read them and notifies. It returns
// when every kind is read or ctx ended.
func (w *gatewayWatch) awaitLate(ctx context.Context, handler cache.ResourceEventHandler, notify func(), late []lateKind) {
	for len(late) > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.poll):
		}
		for i := 0; i < len(late); i++ {
			k := late[i]
			if !k.served(w.disco) {
				continue
			}
			if !w.startLate(ctx, handler, k) {
				return
			}
			w.log.Info(k.name + " are served by the API server: reading them")
			notify()
			late = slices.Delete(late, i, i+1)
			i--
		}
	}
}

// startLate adds a late kind's informers, starts them and waits for
// their caches; false if ctx ended first. Its listers are published only
// then: snapshot never lists a cache that has not synced.
func (w *gatewayWatch) startLate(ctx context.Context, handler cache.ResourceEventHandler, k lateKind) bool {
	publish := k.add()
	w.registerNew(handler)
	for _, f := range w.allFactories() {
		f.StartWithContext(ctx) // starts only the informers not started yet
	}
	for _, f := range w.allFactories() {
		if res := f.WaitForCacheSyncWithContext(ctx); res.Err != nil {
			return false
		}
	}
	publish()
	return true
}

// registerNew sets the watch error logger and the event handler of each
// informer of w.informers not registered yet (before it starts).
func (w *gatewayWatch) registerNew(handler cache.ResourceEventHandler) {
	for kind, inf := range w.informers {
		if w.registered[kind] {
			continue
		}
		w.registered[kind] = true
		log := w.log.With("kind", kind)
		if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			LogWatchError(log, err)
		}); err != nil {
			w.log.Error("setting watch error handler", "kind", kind, "err", err)
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			w.log.Error("adding event handler", "kind", kind, "err", err)
		}
	}
}

// factory is what the watch does with an informer factory.
type factory interface {
	StartWithContext(context.Context)
	WaitForCacheSyncWithContext(context.Context) cache.SyncResult
	Shutdown()
}

// allFactories is every informer factory of the watch.
func (w *gatewayWatch) allFactories() []factory {
	out := []factory{w.core}
	for _, f := range w.factories {
		out = append(out, f)
	}
	for _, f := range w.cmFactories {
		out = append(out, f)
	}
	return out
}

// snapshot lists the caches into in.Gateway; nothing before they synced.
func (w *gatewayWatch) snapshot(in *translate.Input) {
	if !w.synced.Load() {
		return
	}
	g := &in.Gateway
	g.GatewayClasses, _ = w.classes.List(labels.Everything())
	for i := range w.gateways {
		gws, _ := w.gateways[i].List(labels.Everything())
		routes, _ := w.routes[i].List(labels.Everything())
		grants, _ := w.grants[i].List(labels.Everything())
		g.Gateways = append(g.Gateways, gws...)
		g.HTTPRoutes = append(g.HTTPRoutes, routes...)
		g.ReferenceGrants = append(g.ReferenceGrants, grants...)
	}
	var grpc []gwlisters.GRPCRouteLister
	if p := w.grpcRoutes.Load(); p != nil {
		grpc = *p
	}
	for _, l := range grpc {
		routes, _ := l.List(labels.Everything())
		g.GRPCRoutes = append(g.GRPCRoutes, routes...)
	}
	g.Namespaces, _ = w.namespaces.List(labels.Everything())
	w.snapshotBackendTLS(g) // backendtls.go
}

// grpcInformers adds the GRPCRoute informers (kinds "GRPCRoute...") to
// w.informers and returns their listers (the API server serves
// GRPCRoutes).
func (w *gatewayWatch) grpcInformers() []gwlisters.GRPCRouteLister {
	var listers []gwlisters.GRPCRouteLister
	for i, f := range w.factories {
		r := f.Gateway().V1().GRPCRoutes()
		name := "GRPCRoute"
		if len(w.factories) > 1 {
			name = fmt.Sprintf("GRPCRoute/%d", i)
		}
		w.informers[name] = r.Informer()
		listers = append(listers, r.Lister())
	}
	return listers
}
