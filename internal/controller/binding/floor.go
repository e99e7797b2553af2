package binding

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	state "sluice.dev/sluice/internal/controller/snapshot"
	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/targets"
)

// ZoneFloor is the binding's zoneFloor with the default applied.
func ZoneFloor(b *v1alpha1.LoadBalancerBinding) int {
	if f := b.Spec.ZoneFloor; f != nil {
		return int(max(*f, 0))
	}
	return v1alpha1.DefaultZoneFloor
}

// Members lists the live pods of a snapshot for the zone floor: zone of
// the pod's node, healthy when its target is healthy in every group. Pods
// being deleted or without a target are left out; so is everything of an
// Instance binding (a node's target is not one pod's).
func Members(snap *state.Snapshot) []targets.Member {
	if snap == nil || snap.Instance {
		return nil
	}
	ms := make([]targets.Member, 0, len(snap.Pods))
	for name, pt := range snap.Pods {
		if !pt.HasTarget || !pt.Desired || pt.Deleting {
			continue
		}
		healthy := len(snap.Groups) > 0
		for i := range snap.Groups {
			st, ok := snap.Groups[i].Status(pt.Target)
			healthy = healthy && ok && st.State == lb.Healthy
		}
		ms = append(ms, targets.Member{Pod: snap.Binding.Namespace + "/" + name, Zone: pt.Target.Zone, Healthy: healthy})
	}
	slices.SortFunc(ms, func(a, b targets.Member) int { return strings.Compare(a.Pod, b.Pod) })
	return ms
}

// setDeletionCosts writes controller.kubernetes.io/pod-deletion-cost on
// the binding's live pods where it differs from what the zone floor asks
// (see targets.DeletionCosts). Failures are logged: the cost only steers.
func (r *Reconciler) setDeletionCosts(ctx context.Context, b *v1alpha1.LoadBalancerBinding, snap *state.Snapshot, pods []*corev1.Pod) {
	costs := targets.DeletionCosts(Members(snap), ZoneFloor(b))
	if costs == nil {
		return
	}
	for _, p := range pods {
		want, ok := costs[p.Namespace+"/"+p.Name]
		if !ok || p.Annotations[targets.AnnotationDeletionCost] == strconv.Itoa(int(want)) {
			continue
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"annotations": map[string]string{targets.AnnotationDeletionCost: strconv.Itoa(int(want))}}})
		if err != nil {
			continue
		}
		if err := r.opts.Client.Patch(ctx, p.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
			r.log.Info("setting pod-deletion-cost failed", "pod", podKey(p), "err", fmt.Errorf("patching pod: %w", err))
		}
	}
}
