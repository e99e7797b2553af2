package binding

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"sluice.dev/sluice/api/v1alpha1"
	state "sluice.dev/sluice/internal/controller/snapshot"
	"sluice.dev/sluice/internal/targets"
)

// The zone floor's webhooks run on every controller replica, so that no
// review depends on which pod the Service picks. The leader answers from
// the snapshots its reconciles store; a replica that does not lead has
// none, and answers from View: the same snapshot built the same way, from
// its own cache and a read-only listing of the provider.
//
//	binding, pods, nodes (cache) ─► targets.Desired ─┐
//	provider.Targets(group) (read only) ─────────────┴► Snapshot ─► Members ─► Evictable / SteerZone

// views keeps the snapshots View built, one listing per binding at most
// every FastRequeue.
type views struct {
	mu    sync.Mutex
	snaps map[types.NamespacedName]view
}

type view struct {
	snap *state.Snapshot
	gen  int64
	at   time.Time
}

// View returns the snapshot Reconcile would store for b now, without
// acting: the same pods, nodes and desired targets, and each group as the
// provider lists it (no register, deregister, finalizer or status write).
// It is nil where Reconcile stores none or keeps none usable: a binding
// that is forbidden, refused for a group conflict, being deleted, or whose
// provider or listing fails; the webhooks then allow, as the leader does
// without a snapshot. Listings are reused for FastRequeue, so reviews
// cost the provider at most one listing per group and interval.
func (r *Reconciler) View(ctx context.Context, b *v1alpha1.LoadBalancerBinding) *state.Snapshot {
	key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
	now := r.opts.Now()
	r.views.mu.Lock()
	if v, ok := r.views.snaps[key]; ok && v.gen == b.Generation && now.Sub(v.at) < r.opts.FastRequeue && now.Sub(v.at) >= 0 {
		r.views.mu.Unlock()
		return v.snap
	}
	r.views.mu.Unlock()
	snap := r.view(ctx, b)
	r.views.mu.Lock()
	defer r.views.mu.Unlock()
	if len(r.views.snaps) > 4096 {
		clear(r.views.snaps) // bindings come and go; never more than this
	}
	r.views.snaps[key] = view{snap: snap, gen: b.Generation, at: now}
	return snap
}

func (r *Reconciler) view(ctx context.Context, b *v1alpha1.LoadBalancerBinding) *state.Snapshot {
	if b.DeletionTimestamp != nil || r.opts.Access.Check(b) != nil {
		return nil
	}
	if owner, err := r.conflict(ctx, b); err != nil || owner != nil {
		return nil
	}
	prov, groups, err := r.opts.Providers.For(ctx, b)
	if err != nil {
		return nil
	}
	pods, nodes, err := r.read(ctx, b)
	if err != nil {
		return nil
	}
	spec := targetSpec(b)
	desired, _ := targets.Desired(spec, pods, nodes)
	snap := newSnapshot(b, spec, pods, nodes, desired)
	for _, name := range groups {
		current, err := prov.Targets(ctx, name)
		if err != nil {
			return nil
		}
		snap.Groups = append(snap.Groups, state.Group{Name: name, Synced: true, Targets: current})
	}
	return snap
}
