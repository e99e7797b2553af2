package binding

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
	state "sluice.dev/sluice/internal/controller/snapshot"
	"sluice.dev/sluice/internal/lb"
)

// The way out of a stuck finalizer: a deleted binding whose provider fails
// reports DeletionBlocked once its deletion has taken longer than
// drain.timeout, and the annotation sluice.dev/abandon-targets set to the
// binding's current generation lets it go without touching the provider.
//
//	deleted binding ─► abandonDecision ─┬─ abandon: remove finalizer, Event TargetsAbandoned (what is left)
//	                                    ├─ ignored: Event AbandonIgnored, deregister as usual
//	                                    └─ none: deregister ─► fails ─► deletionBlocked? ─► condition + Event DeletionBlocked

// Event reasons of a deletion.
const (
	ReasonDeletionBlocked  = v1alpha1.ConditionDeletionBlocked
	ReasonTargetsAbandoned = "TargetsAbandoned"
	ReasonAbandonIgnored   = "AbandonIgnored"
)

// abandonDecision is what the abandon annotation asks of a binding.
type abandonDecision struct {
	// Abandon: let the binding go, leaving its targets.
	Abandon bool
	// Ignored explains why an annotation present does nothing; "" when
	// none is present or it is honoured.
	Ignored string
}

// decideAbandon reads the abandon annotation of b. It is honoured only on
// a binding being deleted and only when it equals the binding's current
// metadata.generation (deletion raises it), so that an annotation copied
// from another object or left from before the deletion does nothing.
func decideAbandon(b *v1alpha1.LoadBalancerBinding) abandonDecision {
	v, ok := b.Annotations[v1alpha1.AnnotationAbandonTargets]
	if !ok || b.DeletionTimestamp == nil {
		return abandonDecision{}
	}
	gen := strconv.FormatInt(b.Generation, 10)
	if strings.TrimSpace(v) == gen {
		return abandonDecision{Abandon: true}
	}
	// The value is not quoted: whoever may write the binding wrote it.
	return abandonDecision{Ignored: fmt.Sprintf("annotation %s is not the binding's generation %s (deleting a binding raises it, "+
		"so a value set before the deletion or copied from another object does not count): ignored, the targets are deregistered as usual; "+
		"to leave them in the load balancer and let the binding go, set it to %q", v1alpha1.AnnotationAbandonTargets, gen, gen)}
}

// deletionBlocked reports whether a deleted binding whose deregistration
// failed with cause reports DeletionBlocked at now: once its deletion has
// taken longer than its drain timeout. It returns the condition's reason
// and message.
func deletionBlocked(b *v1alpha1.LoadBalancerBinding, now time.Time, cause error) (bool, string, string) {
	if b.DeletionTimestamp == nil || cause == nil {
		return false, "", ""
	}
	_, _, timeout := Settings(b)
	waited := now.Sub(b.DeletionTimestamp.Time)
	if waited < timeout {
		return false, "", ""
	}
	msg := fmt.Sprintf("deleted %s ago, longer than drain.timeout (%s), and its targets cannot be deregistered: %v; "+
		"to let the binding go and leave its targets in the load balancer for you to remove, annotate it %s=%q (sluice remove-bindings --abandon does)",
		waited.Round(time.Second), timeout, cause, v1alpha1.AnnotationAbandonTargets, strconv.FormatInt(b.Generation, 10))
	return true, errorReason(cause), msg
}

// BlockedProbeTimeout bounds the provider calls of one reconcile of a
// binding whose deletion is blocked (DeletionBlocked True).
const BlockedProbeTimeout = 5 * time.Second

// blockedProbe returns ctx bounded by BlockedProbeTimeout when b's
// deletion is blocked, else ctx.
func blockedProbe(ctx context.Context, b *v1alpha1.LoadBalancerBinding) (context.Context, context.CancelFunc) {
	if meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.ConditionDeletionBlocked) {
		return context.WithTimeout(ctx, BlockedProbeTimeout)
	}
	return ctx, func() {}
}

// finalizeFailed is failed for a deleted binding: past its drain timeout
// it also sets DeletionBlocked (with a Warning Event when it becomes so).
func (r *Reconciler) finalizeFailed(ctx context.Context, b *v1alpha1.LoadBalancerBinding, cause error) (reconcile.Result, error) {
	blocked, reason, msg := deletionBlocked(b, r.opts.Now(), cause)
	if !blocked {
		return r.failed(ctx, b, nil, cause)
	}
	if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionDeletionBlocked); c == nil || c.Status != metav1.ConditionTrue {
		r.log.Warn("binding deletion blocked", "binding", types.NamespacedName{Namespace: b.Namespace, Name: b.Name}, "err", cause)
		r.event(b, nil, corev1.EventTypeWarning, ReasonDeletionBlocked, "Delete", msg)
	}
	return r.failed(ctx, b, nil, cause, func(st *v1alpha1.LoadBalancerBindingStatus) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionDeletionBlocked, Status: metav1.ConditionTrue,
			Reason: reason, Message: truncate(msg), ObservedGeneration: b.Generation})
	})
}

// abandon lets a deleted binding go without touching the provider, and
// says what it left there: the targets of its last listing.
func (r *Reconciler) abandon(ctx context.Context, b *v1alpha1.LoadBalancerBinding) (reconcile.Result, error) {
	key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
	left := leftBehind(b, r.opts.Store.Get(key))
	r.log.Warn("binding let go, its targets abandoned", "binding", key, "left", left)
	r.event(b, nil, corev1.EventTypeWarning, ReasonTargetsAbandoned, "Delete",
		"finalizer removed without deregistering ("+v1alpha1.AnnotationAbandonTargets+"); left in the load balancer for the operator: "+left)
	return r.removeFinalizer(ctx, b, key)
}

// leftBehind describes the targets a binding abandons: per group, those
// of its last listing (snap, nil when this controller never listed them).
func leftBehind(b *v1alpha1.LoadBalancerBinding, snap *state.Snapshot) string {
	var parts []string
	if snap != nil && len(snap.Groups) > 0 {
		for _, g := range snap.Groups {
			var ts []lb.Target
			for _, s := range g.Targets {
				if s.State != lb.Unused {
					ts = append(ts, s.Target)
				}
			}
			what := joinTargets(ts)
			if !g.Synced {
				what = "targets unknown (never listed)"
			}
			parts = append(parts, groupName(b, g.Name)+": "+what)
		}
		return strings.Join(parts, "; ")
	}
	for _, name := range specGroups(b) {
		parts = append(parts, groupName(b, name)+": targets unknown (not listed since this controller started)")
	}
	if len(parts) == 0 {
		return "groups and targets unknown (not listed since this controller started)"
	}
	return strings.Join(parts, "; ")
}

// specGroups names the groups the binding's spec names (groups found by
// tag and managed ones are not in the spec).
func specGroups(b *v1alpha1.LoadBalancerBinding) []string {
	switch p := b.Spec.Provider; {
	case p.HAProxy != nil:
		return []string{p.HAProxy.Backend}
	case p.AWS != nil:
		return slices.Clone(p.AWS.TargetGroupARNs)
	}
	return nil
}
