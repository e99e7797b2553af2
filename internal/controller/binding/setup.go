package binding

import (
	"context"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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

// Setup registers the reconciler with mgr: it runs on binding spec changes
// and deletions, on changes of the pods a binding selects (old and new
// labels), and on node changes that may exclude targets. Provider errors
// are retried with backoff from 200ms up to 30s.
func (r *Reconciler) Setup(mgr ctrl.Manager) error {
	c := mgr.GetClient()
	err := ctrl.NewControllerManagedBy(mgr).
		Named("loadbalancerbinding").
		For(&v1alpha1.LoadBalancerBinding{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, deletionChanged(), predicate.AnnotationChangedPredicate{}))).
		Watches(&corev1.Pod{}, podHandler(c), builder.WithPredicates(podChanged())).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(allBindings(c)), builder.WithPredicates(nodeChanged())).
		WithOptions(controller.Options{
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](200*time.Millisecond, 30*time.Second),
		}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the binding controller: %w", err)
	}
	return nil
}

// Selecting returns the bindings in pod's namespace whose selector matches
// its labels, deleted ones included.
func Selecting(ctx context.Context, c client.Reader, pod *corev1.Pod) ([]v1alpha1.LoadBalancerBinding, error) {
	var list v1alpha1.LoadBalancerBindingList
	if err := c.List(ctx, &list, client.InNamespace(pod.Namespace)); err != nil {
		return nil, fmt.Errorf("listing bindings in %s: %w", pod.Namespace, err)
	}
	var out []v1alpha1.LoadBalancerBinding
	for _, b := range list.Items {
		sel, err := metav1.LabelSelectorAsSelector(&b.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, b)
	}
	return out, nil
}

func requestsFor(ctx context.Context, c client.Reader, obj client.Object) []reconcile.Request {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	bs, err := Selecting(ctx, c, pod)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "mapping pod to bindings")
		return nil
	}
	out := make([]reconcile.Request, len(bs))
	for i, b := range bs {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&b)}
	}
	return out
}

// podHandler enqueues the bindings selecting a pod before and after an
// update, so a relabelled pod leaves its old binding too.
func podHandler(c client.Reader) handler.EventHandler {
	add := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], objs ...client.Object) {
		for _, o := range objs {
			for _, req := range requestsFor(ctx, c, o) {
				q.Add(req)
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q, e.Object)
		},
	}
}

func allBindings(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list v1alpha1.LoadBalancerBindingList
		if err := c.List(ctx, &list); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing bindings")
			return nil
		}
		out := make([]reconcile.Request, len(list.Items))
		for i := range list.Items {
			out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
		}
		return out
	}
}

func deletionChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return (e.ObjectOld.GetDeletionTimestamp() == nil) != (e.ObjectNew.GetDeletionTimestamp() == nil)
	}}
}

// podChanged passes pod updates that can change its target: address,
// labels, node, deletion, phase, container readiness (instance targets).
func podChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Pod)
		n, ok2 := e.ObjectNew.(*corev1.Pod)
		if !ok1 || !ok2 {
			return true
		}
		return o.Status.PodIP != n.Status.PodIP || o.Spec.NodeName != n.Spec.NodeName ||
			(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) || o.Status.Phase != n.Status.Phase ||
			!reflect.DeepEqual(o.Labels, n.Labels) || containersReady(o) != containersReady(n)
	}}
}

func containersReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.ContainersReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeChanged passes node updates that can exclude or move targets.
func nodeChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		if !ok1 || !ok2 {
			return true
		}
		return !reflect.DeepEqual(o.Labels, n.Labels) || !reflect.DeepEqual(o.Spec.Taints, n.Spec.Taints) ||
			(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
			!reflect.DeepEqual(o.Status.Addresses, n.Status.Addresses) || o.Spec.ProviderID != n.Spec.ProviderID
	}}
}
