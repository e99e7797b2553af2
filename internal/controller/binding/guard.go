package binding

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/targets"
)

// The emptying guard at the reconciler's edge: which targets still have a
// pod (read from the cache), whether the binding carries the confirmation,
// and how a hold is reported (condition Held, an Event, a metric). The
// decision itself is targets.Guard.

// ReasonHeld is the Held condition's reason while deregistrations wait.
const ReasonHeld = "DeregistrationHeld"

// confirmed reports whether the binding carries
// sluice.dev/confirm-deregister with its current generation.
func confirmed(b *v1alpha1.LoadBalancerBinding) bool {
	v, ok := b.Annotations[v1alpha1.AnnotationConfirmDeregister]
	return ok && strings.TrimSpace(v) == strconv.FormatInt(b.Generation, 10)
}

// maxFraction is the binding's maxDeregisterFraction or its default.
func maxFraction(b *v1alpha1.LoadBalancerBinding) intstr.IntOrString {
	if f := b.Spec.MaxDeregisterFraction; f != nil {
		return *f
	}
	return intstr.FromString(v1alpha1.DefaultMaxDeregisterFraction)
}

// staying reads every pod of the binding's namespace, selected or not, and
// returns the guard's stays function. The pods are only read: the cache's
// objects are not copied (most of a steady reconcile's CPU at 5,000 pods
// was copying them).
func (r *Reconciler) staying(ctx context.Context, b *v1alpha1.LoadBalancerBinding, nodes map[string]*corev1.Node) (func(lb.Target) bool, error) {
	var list corev1.PodList
	if err := r.opts.Client.List(ctx, &list, client.InNamespace(b.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing pods of namespace %s for the emptying guard: %w", b.Namespace, err)
	}
	pods := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	return targets.Staying(pods, nodes), nil
}

// guard returns the function syncGroup applies to each group's plan, the
// holds it collects, and a function giving the error of reading the pods;
// no guard (nil) when the binding confirmed. The pods are read only for
// the first plan that deregisters: a steady reconcile reads none. When they
// cannot be read, the plan deregisters nothing.
func (r *Reconciler) guard(ctx context.Context, b *v1alpha1.LoadBalancerBinding, nodes map[string]*corev1.Node) (func(targets.Plan, []lb.Status) targets.Plan, *[]targets.Held, func() error) {
	held := &[]targets.Held{}
	var stays func(lb.Target) bool
	var err error
	failed := func() error { return err }
	if confirmed(b) {
		return nil, held, failed
	}
	max := maxFraction(b)
	return func(p targets.Plan, current []lb.Status) targets.Plan {
		if len(p.Deregister) == 0 {
			return p
		}
		if stays == nil && err == nil {
			stays, err = r.staying(ctx, b, nodes)
		}
		if err != nil {
			p.Deregister = nil
			return p
		}
		out, h := targets.Guard(p, current, stays, max)
		if len(h.Targets) > 0 {
			*held = append(*held, h)
		}
		return out
	}, held, failed
}

// heldMessage joins the holds of every group into one condition message.
func heldMessage(b *v1alpha1.LoadBalancerBinding, held []targets.Held) string {
	var parts []string
	for _, h := range held {
		parts = append(parts, h.String())
	}
	return strings.Join(parts, "; ") + fmt.Sprintf("; to go ahead, annotate the binding %s=%q",
		v1alpha1.AnnotationConfirmDeregister, strconv.FormatInt(b.Generation, 10))
}

// reportHeld sets the Held condition (in st, written by writeStatus), the
// metric, and emits an Event when a hold starts or changes.
func (r *Reconciler) reportHeld(b *v1alpha1.LoadBalancerBinding, key string, held []targets.Held, msg string) func(*v1alpha1.LoadBalancerBindingStatus) {
	n := 0
	for _, h := range held {
		n += len(h.Targets)
	}
	r.metrics.held.WithLabelValues(key).Set(float64(n))
	prev := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionHeld)
	if n > 0 && (prev == nil || prev.Status != metav1.ConditionTrue || prev.Message != truncate(msg)) {
		r.event(b, nil, corev1.EventTypeWarning, ReasonHeld, "Deregister", msg)
	}
	return func(st *v1alpha1.LoadBalancerBindingStatus) {
		c := metav1.Condition{Type: v1alpha1.ConditionHeld, Status: metav1.ConditionFalse, Reason: "NotHeld",
			Message: "no deregistration is waiting for confirmation", ObservedGeneration: b.Generation}
		if n > 0 {
			c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonHeld, truncate(msg)
		}
		meta.SetStatusCondition(&st.Conditions, c)
	}
}

// holdDeletion keeps a deleted binding, and the targets whose pods still
// run, until the pods are gone or the deletion is confirmed; it looks
// again at the slow poll interval (pod events reconcile sooner).
func (r *Reconciler) holdDeletion(ctx context.Context, b *v1alpha1.LoadBalancerBinding, listed []lb.Status, held int) (reconcile.Result, error) {
	key := b.Namespace + "/" + b.Name
	msg := fmt.Sprintf("the binding is deleted but %d targets' pods still run: they stay registered until the pods are gone; "+
		"to deregister them now, annotate the binding %s=%q", held, v1alpha1.AnnotationConfirmDeregister, strconv.FormatInt(b.Generation, 10))
	r.metrics.setTargets(key, listed)
	extra := r.reportHeld(b, key, []targets.Held{{Targets: make([]lb.Target, held)}}, msg)
	return reconcile.Result{RequeueAfter: r.opts.SlowRequeue}, r.writeStatus(ctx, b, listed, "", nil, extra)
}
