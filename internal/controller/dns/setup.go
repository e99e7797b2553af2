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
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/ingressstatus"
)

// request is the one work item: every reconcile covers every zone.
var request = reconcile.Request{NamespacedName: client.ObjectKey{Name: "dns"}}

// Setup registers the reconciler with mgr (leader-elected): it runs on
// any change of an Ingress, an IngressClass or a binding's spec or
// status.addresses, and every Interval. Provider errors back off from 1s
// to 1m.
func (r *Reconciler) Setup(mgr ctrl.Manager) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{request}
	})
	err := ctrl.NewControllerManagedBy(mgr).
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
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the DNS controller: %w", err)
	}
	return nil
}
