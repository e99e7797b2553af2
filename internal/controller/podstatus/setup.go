package podstatus

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Notifier carries "this pod's view changed" from the binding reconciler to
// the pod-status controller.
type Notifier struct {
	ch chan event.GenericEvent
}

// NewNotifier returns a Notifier with room for size pending pods.
func NewNotifier(size int) *Notifier {
	return &Notifier{ch: make(chan event.GenericEvent, size)}
}

// Notify queues pods for a pod-status reconcile. It blocks while the queue
// is full, until ctx ends.
func (n *Notifier) Notify(ctx context.Context, pods []types.NamespacedName) {
	for _, p := range pods {
		ev := event.GenericEvent{Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}}
		select {
		case n.ch <- ev:
		case <-ctx.Done():
			return
		}
	}
}

// Setup registers the reconciler with mgr: it runs for pods that list the
// readiness gate or are being deleted, and for every pod n names.
func (r *Reconciler) Setup(mgr ctrl.Manager, n *Notifier) error {
	relevant := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pod, ok := o.(*corev1.Pod)
		return !ok || pod.DeletionTimestamp != nil || declaresGate(pod)
	})
	relevant.DeleteFunc = func(event.DeleteEvent) bool { return true } // to forget its timeline
	err := ctrl.NewControllerManagedBy(mgr).
		Named("podstatus").
		For(&corev1.Pod{}, builder.WithPredicates(relevant)).
		WatchesRawSource(source.Channel(n.ch, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the pod-status controller: %w", err)
	}
	return nil
}
