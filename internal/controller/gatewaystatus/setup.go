package gatewaystatus

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
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
// or from WatchGRPCRoutes on.
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
	r.watchGRPC = func() error {
		return c.Watch(source.Kind(mgr.GetCache(), client.Object(&gatewayv1.GRPCRoute{}), one, predicate.GenerationChangedPredicate{}))
	}
	return nil
}
