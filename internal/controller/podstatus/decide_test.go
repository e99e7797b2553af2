package podstatus

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"sluice.dev/sluice/api/v1alpha1"
	ct "sluice.dev/sluice/internal/controller/controllertest"
	state "sluice.dev/sluice/internal/controller/snapshot"
	"sluice.dev/sluice/internal/lb"
)

// snap is a binding snapshot holding pod p1 (10.244.1.5) with the given
// listed state ("" not listed), as desired and deleting say.
func snap(st lb.State, desired, deleting bool) *state.Snapshot {
	return snapGroups(map[string]lb.State{ct.Backend: st}, desired, deleting)
}

// snapGroups is snap with one group per entry of states.
func snapGroups(states map[string]lb.State, desired, deleting bool) *state.Snapshot {
	t := ct.Target("10.244.1.5")
	s := &state.Snapshot{
		Binding: types.NamespacedName{Namespace: ct.Namespace, Name: "b"},
		Pods:    map[string]state.PodTarget{"p1": {UID: "uid-p1", Target: t, HasTarget: true, Desired: desired, Deleting: deleting}},
	}
	for _, name := range slices.Sorted(maps.Keys(states)) {
		g := state.Group{Name: name, Synced: true}
		if st := states[name]; st != "" {
			g.Targets = []lb.Status{{Target: t, State: st}}
		}
		s.Groups = append(s.Groups, g)
	}
	return s
}

func view(name string, s *state.Snapshot) View {
	return View{Binding: "ingress/" + name, Gate: true, Handshake: true, DrainTimeout: time.Minute, Snap: s}
}

func withGate(status corev1.ConditionStatus, reason string) ct.PodOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: v1alpha1.ReadinessGateHealthy, Status: status, Reason: reason})
	}
}

func TestDecideGate(t *testing.T) {
	gateOff := view("off", snap(lb.Initial, true, false))
	gateOff.Gate = false
	unsyncedGroup := snapGroups(map[string]lb.State{"tg-a": lb.Healthy, "tg-b": ""}, true, false)
	unsyncedGroup.Groups[1].Synced = false
	otherUID := snap(lb.Healthy, true, false)
	otherUID.Pods["p1"] = state.PodTarget{UID: "older", Target: ct.Target("10.244.1.5"), HasTarget: true, Desired: true}
	cases := []struct {
		name    string
		pod     *corev1.Pod
		views   []View
		want    string // "status/reason", "" for no change
		recheck bool
	}{
		{"healthy in its only binding", ct.Pod("p1", "10.244.1.5"), []View{view("b", snap(lb.Healthy, true, false))}, "True/TargetHealthy", false},
		{"initial", ct.Pod("p1", "10.244.1.5"), []View{view("b", snap(lb.Initial, true, false))}, "False/TargetNotHealthy", true},
		{"healthy in one of two", ct.Pod("p1", "10.244.1.5"), []View{view("a", snap(lb.Healthy, true, false)), view("b", snap(lb.Unhealthy, true, false))}, "False/TargetNotHealthy", true},
		{"healthy in both", ct.Pod("p1", "10.244.1.5"), []View{view("a", snap(lb.Healthy, true, false)), view("b", snap(lb.Healthy, true, false))}, "True/TargetHealthy", false},
		{"a binding without readiness gate does not count", ct.Pod("p1", "10.244.1.5"), []View{view("a", snap(lb.Healthy, true, false)), gateOff}, "True/TargetHealthy", false},
		{"not registered", ct.Pod("p1", "10.244.1.5"), []View{view("b", snap("", true, false))}, "False/TargetNotHealthy", true},
		{"node leaving: not desired though listed healthy", ct.Pod("p1", "10.244.1.5"), []View{view("b", snap(lb.Healthy, false, false))}, "False/TargetNotHealthy", true},
		{"no binding selects it", ct.Pod("p1", "10.244.1.5"), nil, "False/NoBinding", true},
		{"only gate-off bindings", ct.Pod("p1", "10.244.1.5"), []View{gateOff}, "False/NoBinding", true},
		{"binding not synced yet, no condition", ct.Pod("p1", "10.244.1.5"), []View{view("b", nil)}, "False/Pending", true},
		{"binding not synced yet (restart), condition True stays", ct.Pod("p1", "10.244.1.5", withGate(corev1.ConditionTrue, "TargetHealthy")), []View{view("b", nil)}, "", true},
		{"snapshot predates the pod (same name, other UID)", ct.Pod("p1", "10.244.1.5", withGate(corev1.ConditionTrue, "TargetHealthy")), []View{view("b", otherUID)}, "", true},
		{"one unknown, one unhealthy: False", ct.Pod("p1", "10.244.1.5"), []View{view("a", nil), view("b", snap(lb.Unhealthy, true, false))}, "False/TargetNotHealthy", true},
		{"pod without the readiness gate", ct.Pod("p1", "10.244.1.5", ct.NoGate()), []View{view("b", snap(lb.Healthy, true, false))}, "", false},
		{"healthy in every group", ct.Pod("p1", "10.244.1.5"), []View{view("b", snapGroups(map[string]lb.State{"tg-a": lb.Healthy, "tg-b": lb.Healthy}, true, false))}, "True/TargetHealthy", false},
		{"healthy in one group, initial in the other", ct.Pod("p1", "10.244.1.5"), []View{view("b", snapGroups(map[string]lb.State{"tg-a": lb.Healthy, "tg-b": lb.Initial}, true, false))}, "False/TargetNotHealthy", true},
		{"healthy in one group, missing from the other", ct.Pod("p1", "10.244.1.5"), []View{view("b", snapGroups(map[string]lb.State{"tg-a": lb.Healthy, "tg-b": ""}, true, false))}, "False/TargetNotHealthy", true},
		{"one group never listed", ct.Pod("p1", "10.244.1.5"), []View{view("b", unsyncedGroup)}, "False/Pending", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.pod, tc.views, ct.NewClock().Now())
			got := ""
			if d.Gate != nil {
				got = string(d.Gate.Status) + "/" + d.Gate.Reason
			}
			if got != tc.want {
				t.Errorf("gate = %q, want %q (%+v)", got, tc.want, d.Gate)
			}
			if d.Drained != nil {
				t.Errorf("drained = %+v for a live pod", d.Drained)
			}
			if (d.Wait > 0) != tc.recheck {
				t.Errorf("wait = %v, want recheck %v", d.Wait, tc.recheck)
			}
			// Applying the decision and deciding again changes nothing.
			if d.Gate != nil {
				p := tc.pod.DeepCopy()
				p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
					Type: v1alpha1.ReadinessGateHealthy, Status: d.Gate.Status, Reason: d.Gate.Reason, Message: d.Gate.Message})
				if again := Decide(p, tc.views, ct.NewClock().Now()); again.Gate != nil {
					t.Errorf("second decision = %+v, want no change", again.Gate)
				}
			}
		})
	}
}

func TestDecideDrain(t *testing.T) {
	now := ct.NewClock().Now()
	deleted := now.Add(-10 * time.Second)
	noHandshake := view("b", snap("", false, true))
	noHandshake.Handshake = false
	// Instance: p1's target is its node's. The last pod on the node waits
	// for the node target's drain; with other pods on the node the node
	// target stays and the pod is drained at once.
	instance := func(st lb.State, stays bool) *state.Snapshot {
		s := snap(st, false, true)
		s.Instance = true
		pt := s.Pods["p1"]
		pt.TargetStays = stays
		s.Pods["p1"] = pt
		return s
	}
	neverTarget := snap("", false, true)
	neverTarget.Pods["p1"] = state.PodTarget{UID: "uid-p1", Deleting: true}
	drained := func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: v1alpha1.PodConditionDrained, Status: corev1.ConditionTrue})
	}
	short := view("b", snap(lb.Draining, false, true))
	short.DrainTimeout = 5 * time.Second
	cases := []struct {
		name  string
		opts  []ct.PodOpt
		views []View
		want  string
		wait  bool
	}{
		{"still listed draining", nil, []View{view("b", snap(lb.Draining, false, true))}, "", true},
		{"no longer listed", nil, []View{view("b", snap("", false, true))}, "True/Deregistered", false},
		{"listed unused", nil, []View{view("b", snap(lb.Unused, false, true))}, "True/Deregistered", false},
		{"binding has not seen the deletion", nil, []View{view("b", snap("", true, false))}, "", true},
		{"binding never synced", nil, []View{view("b", nil)}, "", true},
		{"gone from one binding, draining in another", nil, []View{view("a", snap("", false, true)), view("b", snap(lb.Draining, false, true))}, "", true},
		{"gone from both", nil, []View{view("a", snap("", false, true)), view("b", snap(lb.Unused, false, true))}, "True/Deregistered", false},
		{"drain timeout passed", nil, []View{short}, "True/Timeout", false},
		{"timeout in one, gone in the other", nil, []View{short, view("a", snap("", false, true))}, "True/Timeout", false},
		{"handshake off", nil, []View{noHandshake}, "", false},
		{"no binding", nil, nil, "", false},
		{"instance: last pod on the node waits for the node target's drain", nil, []View{view("b", instance(lb.Draining, false))}, "", true},
		{"instance: node target drained", nil, []View{view("b", instance(lb.Unused, false))}, "True/Deregistered", false},
		{"instance: node target deregistered", nil, []View{view("b", instance("", false))}, "True/Deregistered", false},
		{"instance: node target stays for other pods", nil, []View{view("b", instance(lb.Healthy, true))}, "True/NodeTargetStays", false},
		{"instance stays, IP binding still draining", nil, []View{view("a", instance(lb.Healthy, true)), view("b", snap(lb.Draining, false, true))}, "", true},
		{"gone from one group, draining in the other", nil, []View{view("b", snapGroups(map[string]lb.State{"tg-a": "", "tg-b": lb.Draining}, false, true))}, "", true},
		{"gone from one group, unused in the other", nil, []View{view("b", snapGroups(map[string]lb.State{"tg-a": "", "tg-b": lb.Unused}, false, true))}, "True/Deregistered", false},
		{"pod never had a target", nil, []View{view("b", neverTarget)}, "True/Deregistered", false},
		{"already drained", []ct.PodOpt{drained}, []View{view("b", snap(lb.Draining, false, true))}, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := ct.Pod("p1", "10.244.1.5", append([]ct.PodOpt{ct.Deleting(deleted)}, tc.opts...)...)
			d := Decide(pod, tc.views, now)
			got := ""
			if d.Drained != nil {
				got = string(d.Drained.Status) + "/" + d.Drained.Reason
			}
			if got != tc.want {
				t.Errorf("drained = %q, want %q", got, tc.want)
			}
			if d.Gate != nil {
				t.Errorf("gate = %+v for a deleting pod", d.Gate)
			}
			if (d.Wait > 0) != tc.wait {
				t.Errorf("wait = %v, want %v", d.Wait, tc.wait)
			}
		})
	}
}

func TestDrainWaitBoundedByTimeout(t *testing.T) {
	now := ct.NewClock().Now()
	v := view("b", snap(lb.Draining, false, true))
	v.DrainTimeout = 10*time.Second + 300*time.Millisecond
	pod := ct.Pod("p1", "10.244.1.5", ct.Deleting(now.Add(-10*time.Second)))
	if d := Decide(pod, []View{v}, now); d.Wait != 300*time.Millisecond {
		t.Errorf("wait = %v, want the 300ms left of the timeout", d.Wait)
	}
}

// The gate names the zone a pod's healthy target is in, so a surge pod's
// condition tells which zone it adds to.
func TestGateNamesZone(t *testing.T) {
	s := snap(lb.Healthy, true, false)
	pt := s.Pods["p1"]
	pt.Target.Zone = "zone-b"
	s.Pods["p1"] = pt
	s.Groups[0].Targets[0].Target.Zone = "zone-b"
	d := Decide(ct.Pod("p1", "10.244.1.5"), []View{view("b", s)}, time.Now())
	if d.Gate == nil || d.Gate.Status != corev1.ConditionTrue || !strings.Contains(d.Gate.Message, "(zone zone-b)") {
		t.Fatalf("gate = %+v, want True naming zone-b", d.Gate)
	}
}
