package ingressdaemonset

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
)

// Setup registers the reconciler with mgr: it runs on IngressDaemonSet
// changes, on changes of the Deployments and DaemonSets it owns, and on
// node changes (added, removed, relabelled, cordoned, annotated). Errors
// are retried with backoff from 200ms up to 30s.
func (r *Reconciler) Setup(mgr ctrl.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named("ingressdaemonset").
		For(&v1alpha1.IngressDaemonSet{}).
		Owns(&appsv1.Deployment{}).
		Owns(&appsv1.DaemonSet{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(all(mgr.GetClient())), builder.WithPredicates(nodeChanged())).
		WithOptions(controller.Options{
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](200*time.Millisecond, 30*time.Second),
		}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the ingressdaemonset controller: %w", err)
	}
	return nil
}

// all maps any event to every IngressDaemonSet.
func all(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list v1alpha1.IngressDaemonSetList
		if err := c.List(ctx, &list); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, x := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&x)})
		}
		return out
	}
}

// nodeChanged passes node changes that matter to a rollout: labels,
// annotations, taints, schedulability, addresses, deletion.
func nodeChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		if !ok1 || !ok2 {
			return true
		}
		return !reflect.DeepEqual(o.Labels, n.Labels) || !reflect.DeepEqual(o.Annotations, n.Annotations) ||
			!reflect.DeepEqual(o.Spec.Taints, n.Spec.Taints) || o.Spec.Unschedulable != n.Spec.Unschedulable ||
			(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) || !reflect.DeepEqual(o.Status.Addresses, n.Status.Addresses)
	}}
}

// mergePatch is a JSON merge patch of metadata.annotations and labels.
func mergePatch(annotations, labels map[string]any) ([]byte, error) {
	md := map[string]any{"annotations": annotations}
	if len(labels) > 0 {
		md["labels"] = labels
	}
	b, err := json.Marshal(map[string]any{"metadata": md})
	if err != nil {
		return nil, fmt.Errorf("encoding the annotation patch: %w", err)
	}
	return b, nil
}
