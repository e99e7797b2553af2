package gatewaystatus

import (
	"context"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/ingressstatus"
)

// key is the one request: every change recomputes every status.
var key = reconcile.Request{NamespacedName: types.NamespacedName{Name: "gateway-api"}}

// Setup registers the reconciler with mgr. Spec changes (generation) of
// the Gateway API objects, Namespace label changes, Services coming and
// going, and bindings' addresses all enqueue the one key; the reconciler's
// own status writes do not. GRPCRoutes are watched with Options.GRPCRoutes,
// or from WatchGRPCRoutes on; BackendTLSPolicies (and the ConfigMaps they
// name) with Options.BackendTLSPolicies, or from WatchBackendTLSPolicies
// on.
func (r *Reconciler) Setup(mgr ctrl.Manager) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{key}
	})
	gen := builder.WithPredicates(predicate.GenerationChangedPredicate{})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("gatewaystatus").
		Watches(&gatewayv1.GatewayClass{}, one, gen).
		Watches(&gatewayv1.Gateway{}, one, gen).
		Watches(&gatewayv1.HTTPRoute{}, one, gen).
		Watches(&gatewayv1.ReferenceGrant{}, one, gen).
		Watches(&corev1.Namespace{}, one, builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&corev1.Service{}, one).
		Watches(&v1alpha1.LoadBalancerBinding{}, one, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, ingressstatus.AddressesChanged())))
	if r.opts.ReadSecrets {
		b = b.Watches(&corev1.Secret{}, one)
	}
	if r.opts.GRPCRoutes {
		b = b.Watches(&gatewayv1.GRPCRoute{}, one, gen)
	}
	if r.opts.BackendTLSPolicies {
		// ConfigMaps: metadata only, and only those a policy names.
		b = b.Watches(&gatewayv1.BackendTLSPolicy{}, one, gen).
			Watches(&corev1.ConfigMap{}, one, builder.OnlyMetadata, builder.WithPredicates(predicate.NewPredicateFuncs(r.caRefs.has)))
	}
	c, err := b.Build(r)
	if err != nil {
		return fmt.Errorf("setting up the gateway-status controller: %w", err)
	}
	r.grpcLater.watch = func() error {
		return c.Watch(source.Kind(mgr.GetCache(), client.Object(&gatewayv1.GRPCRoute{}), one, predicate.GenerationChangedPredicate{}))
	}
	r.tlsLater.watch = func() error {
		if err := c.Watch(source.Kind(mgr.GetCache(), client.Object(&gatewayv1.BackendTLSPolicy{}), one, predicate.GenerationChangedPredicate{})); err != nil {
			return err
		}
		cm := &metav1.PartialObjectMetadata{}
		cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		return c.Watch(source.Kind(mgr.GetCache(), client.Object(cm), one, predicate.NewPredicateFuncs(r.caRefs.has)))
	}
	return nil
}

// late is an optional kind whose CRD the API server served only after
// Setup.
type late struct {
	on    atomic.Bool  // read from now on
	watch func() error // set by Setup
}

// start has the kind read from now on and watched.
func (l *late) start(kind string) error {
	if l.watch == nil {
		return fmt.Errorf("watching %s: the gateway-status controller is not set up", kind)
	}
	l.on.Store(true) // before the watch's first events reconcile
	if err := l.watch(); err != nil {
		return fmt.Errorf("watching %s: %w", kind, err)
	}
	return nil
}
