package manager

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/admission"
	"sluice.dev/sluice/internal/controller/binding"
	"sluice.dev/sluice/internal/controller/snapshot"
)

// Viewer builds a binding's snapshot without acting
// (binding.Reconciler.View).
type Viewer interface {
	View(ctx context.Context, b *v1alpha1.LoadBalancerBinding) *snapshot.Snapshot
}

// leaderOrView answers from store once elected (closed), before that from
// v: a replica that does not lead runs no reconcile, so its store stays
// empty.
func leaderOrView(elected <-chan struct{}, store *snapshot.Store, v Viewer) admission.Snapshots {
	return func(ctx context.Context, b *v1alpha1.LoadBalancerBinding) *snapshot.Snapshot {
		select {
		case <-elected:
			return store.Get(types.NamespacedName{Namespace: b.Namespace, Name: b.Name})
		default:
			return v.View(ctx, b)
		}
	}
}

// warmCache starts, on every replica, the informers the webhooks read
// (bindings, pods, nodes), so that a replica that does not lead answers
// its first review from a synced cache rather than waiting for one.
func warmCache(c cache.Cache) manager.Runnable {
	return runnable{start: func(ctx context.Context) error {
		for _, o := range []client.Object{&v1alpha1.LoadBalancerBinding{}, &corev1.Pod{}, &corev1.Node{}} {
			if _, err := c.GetInformer(ctx, o); err != nil {
				return fmt.Errorf("starting the informer of %T for the webhooks: %w", o, err)
			}
		}
		<-ctx.Done()
		return nil
	}}
}

// runnable is a manager.Runnable that runs on every replica.
type runnable struct {
	start func(ctx context.Context) error
}

func (r runnable) Start(ctx context.Context) error { return r.start(ctx) }
func (r runnable) NeedLeaderElection() bool        { return false }

var (
	_ manager.LeaderElectionRunnable = runnable{}
	_ Viewer                         = (*binding.Reconciler)(nil)
)
