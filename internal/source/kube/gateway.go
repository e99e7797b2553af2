package kube

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
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
// GRPCRoute CRD is optional: without it the other kinds are watched, and it
// is looked for every crdPoll too, its informers added once it appears.
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
	// BackendTLSPolicies and ConfigMaps (their CA bundles), per watched
	// namespace; nil when BackendTLSPolicies are not served (backendtls.go).
	tlsPolicies   []gwlisters.BackendTLSPolicyLister
	configMaps    []corelisters.ConfigMapLister
	client        kubernetes.Interface
	namespaceList []string
	cmFactories   []informers.SharedInformerFactory

	synced atomic.Bool
}

// crdPoll is how often a source without the Gateway API CRDs looks again.
const crdPoll = 30 * time.Second

func newGatewayWatch(client kubernetes.Interface, gw gwclient.Interface, namespaces []string, log *slog.Logger) *gatewayWatch {
	w := &gatewayWatch{log: log.With("api", "gateway"), disco: client.Discovery(), poll: crdPoll,
		informers: map[string]cache.SharedIndexInformer{}, client: client, namespaceList: namespaces}
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
	grpc := w.grpcInformers()
	w.watchBackendTLS() // backendtls.go
	for kind, inf := range w.informers {
		w.register(kind, inf, handler)
	}
	w.core.StartWithContext(ctx)
	for _, f := range w.factories {
		f.StartWithContext(ctx)
	}
	for _, f := range w.cmFactories {
		f.StartWithContext(ctx)
	}
	defer func() {
		w.core.Shutdown()
		for _, f := range w.factories {
			f.Shutdown()
		}
		for _, f := range w.cmFactories {
			f.Shutdown()
		}
	}()
	if res := w.core.WaitForCacheSyncWithContext(ctx); res.Err != nil {
		return
	}
	for _, f := range w.cmFactories {
		if res := f.WaitForCacheSyncWithContext(ctx); res.Err != nil {
			return
		}
	}
	for _, f := range w.factories {
		if res := f.WaitForCacheSyncWithContext(ctx); res.Err != nil {
			return
		}
	}
	if grpc != nil {
		w.grpcRoutes.Store(&grpc)
	}
	w.synced.Store(true)
	w.log.Info("Gateway API caches synced")
	if told {
		notify()
	} else {
		close(first)
	}
	if grpc == nil {
		w.log.Info("GRPCRoutes are not served by the API server; GRPCRoutes are read once they are", "recheck", w.poll)
		if !w.awaitGRPCRoutes(ctx, handler) {
			return
		}
		w.log.Info("GRPCRoutes are served by the API server: reading them")
		notify()
	}
	<-ctx.Done()
}

// register sets the watch error logger and the event handler of one
// informer (before it starts).
func (w *gatewayWatch) register(kind string, inf cache.SharedIndexInformer, handler cache.ResourceEventHandler) {
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

// awaitGRPCRoutes looks every poll whether the API server serves
// GRPCRoutes; once it does, it starts their informers and returns true
// when their caches synced (the listers then in w.grpcRoutes), false if
// ctx ended first.
func (w *gatewayWatch) awaitGRPCRoutes(ctx context.Context, handler cache.ResourceEventHandler) bool {
	for served := false; !served; served = gateway.GRPCRoutesServed(w.disco) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(w.poll):
		}
	}
	listers := w.grpcInformers()
	for kind, inf := range w.informers {
		if strings.HasPrefix(kind, "GRPCRoute") {
			w.register(kind, inf, handler)
		}
	}
	for _, f := range w.factories {
		f.StartWithContext(ctx) // starts only the informers not started yet
	}
	for _, f := range w.factories {
		if res := f.WaitForCacheSyncWithContext(ctx); res.Err != nil {
			return false
		}
	}
	w.grpcRoutes.Store(&listers)
	return true
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
// w.informers and returns their listers when the API server serves
// GRPCRoutes; nil when it does not.
func (w *gatewayWatch) grpcInformers() []gwlisters.GRPCRouteLister {
	if !gateway.GRPCRoutesServed(w.disco) {
		return nil
	}
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
