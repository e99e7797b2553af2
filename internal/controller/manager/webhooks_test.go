package manager

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/snapshot"
)

type viewer struct{ calls int }

func (v *viewer) View(_ context.Context, b *v1alpha1.LoadBalancerBinding) *snapshot.Snapshot {
	v.calls++
	return &snapshot.Snapshot{Binding: types.NamespacedName{Namespace: b.Namespace, Name: "viewed"}}
}

// Before the election the webhooks answer from the view a replica builds;
// once elected, from the store its reconciles fill.
func TestLeaderOrView(t *testing.T) {
	store := snapshot.NewStore()
	store.Put(&snapshot.Snapshot{Binding: types.NamespacedName{Namespace: "ns", Name: "b"}})
	b := &v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}}
	elected := make(chan struct{})
	v := &viewer{}
	snaps := leaderOrView(elected, store, v)
	if got := snaps(context.Background(), b); got == nil || got.Binding.Name != "viewed" || v.calls != 1 {
		t.Fatalf("not leading: %+v (%d views), want the view", got, v.calls)
	}
	close(elected)
	if got := snaps(context.Background(), b); got == nil || got.Binding.Name != "b" || v.calls != 1 {
		t.Fatalf("leading: %+v (%d views), want the stored snapshot", got, v.calls)
	}
}
