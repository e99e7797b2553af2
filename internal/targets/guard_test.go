package targets

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"sluice.dev/sluice/internal/lb"
)

func tgt(s string) lb.Target { return lb.Target{Address: netip.MustParseAddrPort(s)} }

func gst(s string, state lb.State) lb.Status { return lb.Status{Target: tgt(s), State: state} }

func TestGuard(t *testing.T) {
	a, b, c, d := "10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80"
	four := []lb.Status{gst(a, lb.Healthy), gst(b, lb.Healthy), gst(c, lb.Healthy), gst(d, lb.Healthy)}
	half := intstr.FromString("50%")
	for _, tc := range []struct {
		name    string
		current []lb.Status
		dereg   []string
		stays   []string // targets whose pods still run
		max     intstr.IntOrString
		applied []string
		held    []string
	}{
		{"pods gone: never held", four, []string{a, b, c, d}, nil, half, []string{a, b, c, d}, nil},
		{"half of them by spec: allowed", four, []string{a, b}, []string{a, b}, half, []string{a, b}, nil},
		{"three of four by spec: held", four, []string{a, b, c}, []string{a, b, c}, half, nil, []string{a, b, c}},
		{"held, the gone one still goes", four, []string{a, b, c, d}, []string{a, b, c}, half, []string{d}, []string{a, b, c}},
		{"all by spec though within count", four, []string{a, b, c, d}, []string{a, b, c, d}, intstr.FromInt32(4), nil, []string{a, b, c, d}},
		{"one spec, rest gone: none left", four, []string{a, b, c, d}, []string{a}, half, []string{b, c, d}, []string{a}},
		{"the only healthy one", []lb.Status{gst(a, lb.Healthy), gst(b, lb.Unhealthy)}, []string{a, b}, []string{a, b}, half, nil, []string{a, b}},
		{"unhealthy only: not guarded", []lb.Status{gst(a, lb.Healthy), gst(b, lb.Unhealthy)}, []string{b}, []string{b}, half, []string{b}, nil},
		{"a count", four, []string{a, b, c}, []string{a, b, c}, intstr.FromInt32(3), []string{a, b, c}, nil},
		{"100% still keeps the last", four, []string{a, b, c, d}, []string{a, b, c, d}, intstr.FromString("100%"), nil, []string{a, b, c, d}},
		{"bad fraction is 50%", four, []string{a, b, c}, []string{a, b, c}, intstr.FromString("lots"), nil, []string{a, b, c}},
		{"nothing to do", four, nil, nil, half, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := Plan{}
			for _, s := range tc.dereg {
				plan.Deregister = append(plan.Deregister, tgt(s))
			}
			stays := func(x lb.Target) bool { return slices.Contains(tc.stays, x.Address.String()) }
			got, held := Guard(plan, tc.current, stays, tc.max)
			if s := strs(got.Deregister); !slices.Equal(s, tc.applied) {
				t.Errorf("applied %v, want %v", s, tc.applied)
			}
			if s := strs(held.Targets); !slices.Equal(s, tc.held) {
				t.Errorf("held %v, want %v", s, tc.held)
			}
			if (held.String() == "") != (len(tc.held) == 0) {
				t.Errorf("message %q", held.String())
			}
		})
	}
}

func strs(ts []lb.Target) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Address.String())
	}
	return out
}

func TestStaying(t *testing.T) {
	now := metav1.Now()
	nodes := map[string]*corev1.Node{
		"n1":   {ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.1.0.1"}}}},
		"gone": {ObjectMeta: metav1.ObjectMeta{Name: "gone", Labels: map[string]string{LabelExcludeFromLB: ""}}},
	}
	pod := func(name, ip, node string, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{PodIP: ip}}
		if deleting {
			p.DeletionTimestamp = &now
		}
		return p
	}
	stays := Staying([]*corev1.Pod{
		pod("live", "10.244.0.1", "n1", false),
		pod("deleting", "10.244.0.2", "n1", true),
		pod("leaving-node", "10.244.0.3", "gone", false),
		nil,
	}, nodes)
	for addr, want := range map[string]bool{
		"10.244.0.1:80": true, "10.244.0.2:80": false, "10.244.0.3:80": false, "10.244.0.9:80": false,
		"10.1.0.1:30080": true, // the live pod's node (Instance target)
	} {
		if got := stays(tgt(addr)); got != want {
			t.Errorf("stays(%s) = %v, want %v", addr, got, want)
		}
	}
}
