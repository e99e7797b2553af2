package ingressdaemonset_test

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/controller/ingressdaemonset"
	"sluice.dev/sluice/internal/controller/snapshot"
	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/nodes"
)

func TestLBView(t *testing.T) {
	instance := func(opts ...controllertest.BindingOpt) v1alpha1.LoadBalancerBinding {
		b := controllertest.Binding("edge", opts...)
		b.Spec.TargetType = v1alpha1.TargetInstance
		b.Spec.Port = intstr.FromInt32(80)
		return *b
	}
	target := func(ip string, st lb.State) lb.Status {
		return lb.Status{Target: lb.Target{Address: netip.MustParseAddrPort(ip + ":80")}, State: st}
	}
	snap := func(b v1alpha1.LoadBalancerBinding, ts ...lb.Status) *snapshot.Snapshot {
		return &snapshot.Snapshot{Generation: b.Generation, Groups: []snapshot.Group{{Name: "be", Synced: true, Targets: ts}}}
	}
	ns := []*corev1.Node{node("a", "10.0.0.1"), node("b", "10.0.0.2"), node("c", "10.0.0.3")}
	b := instance()
	other := instance()
	other.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
	ipMode := instance()
	ipMode.Spec.TargetType = v1alpha1.TargetIP
	tests := []struct {
		name     string
		bindings []v1alpha1.LoadBalancerBinding
		snap     *snapshot.Snapshot
		want     map[string]nodes.NodeLB
	}{{
		name:     "no binding selects the pods",
		bindings: []v1alpha1.LoadBalancerBinding{other, ipMode},
		snap:     snap(b),
		want:     map[string]nodes.NodeLB{},
	}, {
		name:     "not synced yet: nothing drained, nothing healthy",
		bindings: []v1alpha1.LoadBalancerBinding{b},
		want: map[string]nodes.NodeLB{
			"a": {Served: true, Listed: true, DrainTimeout: 5 * time.Minute},
			"b": {Served: true, Listed: true, DrainTimeout: 5 * time.Minute},
			"c": {Served: true, Listed: true, DrainTimeout: 5 * time.Minute},
		},
	}, {
		name:     "healthy, draining, gone",
		bindings: []v1alpha1.LoadBalancerBinding{b},
		snap:     snap(b, target("10.0.0.1", lb.Healthy), target("10.0.0.2", lb.Draining)),
		want: map[string]nodes.NodeLB{
			"a": {Served: true, Synced: true, Listed: true, Healthy: true, DrainTimeout: 5 * time.Minute},
			"b": {Served: true, Synced: true, Listed: true, DrainTimeout: 5 * time.Minute},
			"c": {Served: true, Synced: true, DrainTimeout: 5 * time.Minute},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ingressdaemonset.LBView(newIDS(), tt.bindings, func(types.NamespacedName) *snapshot.Snapshot { return tt.snap }, ns)
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for n, w := range tt.want {
				if got[n] != w {
					t.Errorf("node %s: got %+v, want %+v", n, got[n], w)
				}
			}
		})
	}
}
