package binding

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/lb"
)

// maxMessage bounds condition messages and lastError.
const maxMessage = 1024

// writeStatus sets the binding's status from the listed targets and the
// outcome (cause nil: success; reason names the failure) and writes it if
// anything changed.
// extra sets further fields (addresses, zones, the Held condition).
func (r *Reconciler) writeStatus(ctx context.Context, b *v1alpha1.LoadBalancerBinding, listed []lb.Status, reason string, cause error,
	extra ...func(*v1alpha1.LoadBalancerBindingStatus)) error {
	orig := b.DeepCopy()
	st := &b.Status
	st.ObservedGeneration = b.Generation
	st.Targets = countTargets(listed)
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: truncate(msg), ObservedGeneration: b.Generation,
		})
	}
	if cause == nil {
		st.LastError = ""
		set(v1alpha1.ConditionProviderReachable, metav1.ConditionTrue, "Reachable", "the provider answered the last reconcile")
		set(v1alpha1.ConditionReady, metav1.ConditionTrue, "TargetsRegistered", describe(st.Targets))
	} else {
		st.LastError = truncate(cause.Error())
		if reason != "InvalidSelector" && reason != ReasonGroupConflict && reason != ReasonForbidden {
			set(v1alpha1.ConditionProviderReachable, metav1.ConditionFalse, reason, cause.Error())
		}
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, reason, cause.Error())
	}
	for _, f := range extra {
		f(st)
	}
	if equality.Semantic.DeepEqual(orig.Status, b.Status) {
		return nil
	}
	// The whole status in one merge patch: a diff would leave out the
	// target counts that did not change, and the CRD requires all of them
	// once status.targets exists. The controller owns every status field;
	// an empty lastError (omitempty) is removed explicitly.
	var lastError any
	if b.Status.LastError != "" {
		lastError = b.Status.LastError
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"observedGeneration": b.Status.ObservedGeneration,
		"conditions":         b.Status.Conditions,
		"targets":            b.Status.Targets,
		"lastError":          lastError,
		"addresses":          b.Status.Addresses,
		"zones":              b.Status.Zones,
	}})
	if err != nil {
		return fmt.Errorf("encoding status of binding %s/%s: %w", b.Namespace, b.Name, err)
	}
	if err := r.opts.Client.Status().Patch(ctx, b, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing status of binding %s/%s: %w", b.Namespace, b.Name, err)
	}
	return nil
}

func countTargets(listed []lb.Status) v1alpha1.TargetCounts {
	var c v1alpha1.TargetCounts
	for _, s := range listed {
		switch s.State {
		case lb.Initial:
			c.Initial++
		case lb.Healthy:
			c.Healthy++
		case lb.Unhealthy:
			c.Unhealthy++
		case lb.Draining:
			c.Draining++
		case lb.Unavailable:
			c.Unavailable++
		}
	}
	return c
}

func describe(c v1alpha1.TargetCounts) string {
	total := c.Initial + c.Healthy + c.Unhealthy + c.Draining + c.Unavailable
	return fmt.Sprintf("every desired target is registered; %d targets: %d healthy, %d initial, %d unhealthy, %d draining, %d unavailable",
		total, c.Healthy, c.Initial, c.Unhealthy, c.Draining, c.Unavailable)
}

func truncate(s string) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) <= maxMessage {
		return s
	}
	return strings.ToValidUTF8(s[:maxMessage-3], "") + "..."
}
