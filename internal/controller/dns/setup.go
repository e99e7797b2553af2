package dns

import (
	"context"
	"fmt"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/ingressstatus"
)

// request is the one work item: every reconcile covers every zone.
var request = reconcile.Request{NamespacedName: client.ObjectKey{Name: "dns"}}

// Setup registers the reconciler with mgr (leader-elected): it runs on
// any change of an Ingress, an IngressClass or a binding's spec or
// status.addresses, and every Interval; with Options.Routes, also on
// changes of GatewayClasses, Gateways (spec and status), HTTPRoutes and
// GRPCRoutes once the reader says the CRDs are served. Provider errors
// back off from 1s to 1m.
func (r *Reconciler) Setup(mgr ctrl.Manager) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{request}
	})
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("dns").
		Watches(&networkingv1.Ingress{}, one, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, ingressstatus.DeletionChanged()))).
		Watches(&networkingv1.IngressClass{}, one).
		Watches(&v1alpha1.LoadBalancerBinding{}, one, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, ingressstatus.DeletionChanged(), ingressstatus.AddressesChanged()))).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: 1,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, time.Minute),
		}).
		Build(r)
	if err != nil {
		return fmt.Errorf("setting up the DNS controller: %w", err)
	}
	if r.opts.Routes == nil {
		return nil
	}
	served := r.opts.Routes.Served()
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return nil
		case <-served:
		}
		return r.watchGateways(mgr, c, one)
	}))
	if err != nil {
		return fmt.Errorf("adding the DNS controller's Gateway API watch: %w", err)
	}
	return nil
}

// watchGateways adds the watches of the Gateway API objects whose changes
// change the Gateways' records: a Gateway's status (Programmed,
// addresses) changes no generation.
func (r *Reconciler) watchGateways(mgr ctrl.Manager, c controller.Controller, one handler.EventHandler) error {
	gen := predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, ingressstatus.DeletionChanged())
	srcs := []source.Source{
		source.Kind[client.Object](mgr.GetCache(), &gatewayv1.GatewayClass{}, one, gen),
		source.Kind[client.Object](mgr.GetCache(), &gatewayv1.Gateway{}, one),
		source.Kind[client.Object](mgr.GetCache(), &gatewayv1.HTTPRoute{}, one, gen),
	}
	if r.opts.Routes.GRPCRoutesServed() {
		srcs = append(srcs, source.Kind[client.Object](mgr.GetCache(), &gatewayv1.GRPCRoute{}, one, gen))
	}
	for _, s := range srcs {
		if err := c.Watch(s); err != nil {
			return fmt.Errorf("watching Gateway API objects for DNS: %w", err)
		}
	}
	r.log.Info("dns: watching Gateways and their routes")
	return nil
}
