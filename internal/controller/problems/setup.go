package problems

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// everything is the one request the reconciler queues: every change
// collapses into it while a run is pending.
var everything = reconcile.Request{NamespacedName: types.NamespacedName{Name: "all-ingresses"}}

// Setup registers the reconciler with mgr: any change of an Ingress,
// IngressClass, Service, EndpointSlice, (with ReadSecrets) TLS Secret or
// (with PodChanges) Pod address queues one run. It runs on the leader only.
func (r *Reconciler) Setup(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{everything}
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("ingressproblems").
		Watches(&networkingv1.Ingress{}, all).
		Watches(&networkingv1.IngressClass{}, all).
		Watches(&corev1.Service{}, all).
		Watches(&discoveryv1.EndpointSlice{}, all)
	if r.opts.ReadSecrets {
		b = b.Watches(&corev1.Secret{}, all)
	}
	if r.opts.PodChanges != nil {
		b = b.WatchesRawSource(source.Channel(r.opts.PodChanges, all))
	}
	err := b.Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the ingress-problems controller: %w", err)
	}
	return nil
}
