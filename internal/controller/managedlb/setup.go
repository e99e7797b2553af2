package managedlb

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
)

// Setup registers the reconciler with mgr: it runs on binding spec,
// annotation and finalizer changes, and for every managed binding when an
// Ingress or IngressClass changes (their hosts choose the certificates).
func (r *Reconciler) Setup(mgr ctrl.Manager) error {
	c := mgr.GetClient()
	all := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list v1alpha1.LoadBalancerBindingList
		if err := c.List(ctx, &list); err != nil {
			r.log.Warn("listing bindings", "err", err)
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			if Managed(&list.Items[i]) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
		return out
	})
	finalizers := predicate.Funcs{UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
		return len(e.ObjectOld.GetFinalizers()) != len(e.ObjectNew.GetFinalizers())
	}}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("managedlb").
		For(&v1alpha1.LoadBalancerBinding{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, finalizers))).
		Watches(&networkingv1.Ingress{}, all, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&networkingv1.IngressClass{}, all).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the managed load balancer controller: %w", err)
	}
	return nil
}
