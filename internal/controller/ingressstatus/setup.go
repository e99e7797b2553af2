package ingressstatus

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/translate"
)

// Setup registers the reconciler with mgr: it runs on Ingress spec and
// annotation changes, and for every Ingress when an IngressClass, a
// binding's spec or its status.addresses change.
func (r *Reconciler) Setup(mgr ctrl.Manager) error {
	c := mgr.GetClient()
	all := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list networkingv1.IngressList
		if err := c.List(ctx, &list); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing ingresses")
			return nil
		}
		out := make([]reconcile.Request, len(list.Items))
		for i := range list.Items {
			out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
		}
		return out
	})
	// Host ownership: a change of one Ingress (created, deleted, hosts
	// edited) may give or take the hosts of every other Ingress naming
	// one of its hosts.
	sameHosts := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		ing, ok := o.(*networkingv1.Ingress)
		if !ok || r.opts.HostOwnership == translate.HostOwnershipNone {
			return nil
		}
		var list networkingv1.IngressList
		if err := c.List(ctx, &list); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing ingresses")
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			other := &list.Items[i]
			if (other.Namespace != ing.Namespace || other.Name != ing.Name) && sharesHost(ing, other) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(other)})
			}
		}
		return out
	})
	deletion := DeletionChanged()
	err := ctrl.NewControllerManagedBy(mgr).
		Named("ingressstatus").
		For(&networkingv1.Ingress{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&networkingv1.Ingress{}, sameHosts, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deletion))).
		Watches(&networkingv1.IngressClass{}, all).
		Watches(&v1alpha1.LoadBalancerBinding{}, all, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, deletion, AddressesChanged()))).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the ingress-status controller: %w", err)
	}
	return nil
}

// sharesHost reports whether a and b name a common rule or TLS host.
func sharesHost(a, b *networkingv1.Ingress) bool {
	hosts := map[string]bool{}
	for _, h := range hostsOf(a) {
		hosts[h] = true
	}
	for _, h := range hostsOf(b) {
		if hosts[h] {
			return true
		}
	}
	return false
}

// DeletionChanged passes updates that set or clear the deletion timestamp.
func DeletionChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return (e.ObjectOld.GetDeletionTimestamp() == nil) != (e.ObjectNew.GetDeletionTimestamp() == nil)
	}}
}

// AddressesChanged passes binding updates that change status.addresses.
func AddressesChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.LoadBalancerBinding)
		n, ok2 := e.ObjectNew.(*v1alpha1.LoadBalancerBinding)
		return !ok1 || !ok2 || !equality.Semantic.DeepEqual(o.Status.Addresses, n.Status.Addresses)
	}}
}
