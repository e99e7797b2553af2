package targets

import (
	"strings"
	"testing"
)

func TestDeletionCosts(t *testing.T) {
	ms := []Member{
		{"ns/a1", "a", true}, {"ns/a2", "a", true}, {"ns/a3", "a", true}, // surplus 2
		{"ns/b1", "b", true}, {"ns/b2", "b", true}, // surplus 1
		{"ns/c1", "c", true},  // at the floor
		{"ns/c2", "c", false}, // not healthy
		{"ns/d1", "", true},   // unknown zone, at the floor
	}
	got := DeletionCosts(ms, 1)
	want := map[string]int32{"ns/a1": 999, "ns/a2": 999, "ns/a3": 999, "ns/b1": 1000, "ns/b2": 1000, "ns/c1": CostFloor, "ns/c2": CostNotHealthy, "ns/d1": CostFloor}
	for pod, w := range want {
		if got[pod] != w {
			t.Errorf("%s: cost %d, want %d", pod, got[pod], w)
		}
	}
	// Ordering the ReplicaSet sees: unhealthy, then the largest surplus, the floor last.
	if !(got["ns/c2"] < got["ns/a1"] && got["ns/a1"] < got["ns/b1"] && got["ns/b1"] < got["ns/c1"]) {
		t.Errorf("order: %v", got)
	}
	if DeletionCosts(ms, 0) != nil {
		t.Error("floor 0 set costs")
	}
	if c := DeletionCosts([]Member{{"p", "a", true}, {"q", "a", true}, {"r", "a", true}}, 2)["p"]; c != 1000 {
		t.Errorf("floor 2 with 3 healthy: %d", c)
	}
	// A huge surplus stays above CostNotHealthy.
	var many []Member
	for i := 0; i < 5000; i++ {
		many = append(many, Member{Pod: string(rune('a' + i%26)), Zone: "z", Healthy: true})
	}
	if c := DeletionCosts(many, 1)["a"]; c <= CostNotHealthy {
		t.Errorf("huge surplus: %d", c)
	}
}

func TestEvictable(t *testing.T) {
	ms := []Member{{"ns/a1", "a", true}, {"ns/a2", "a", true}, {"ns/b1", "b", true}, {"ns/b2", "b", false}}
	for _, tc := range []struct {
		pod   string
		floor int
		ok    bool
	}{
		{"ns/a1", 1, true},
		{"ns/b1", 1, false}, // zone b's last healthy target
		{"ns/b2", 1, true},  // not healthy
		{"ns/x", 1, true},   // unknown pod
		{"ns/b1", 0, true},  // floor off
		{"ns/a1", 2, false},
	} {
		ok, reason := Evictable(ms, tc.pod, tc.floor)
		if ok != tc.ok || (!ok && !strings.Contains(reason, "below the floor")) {
			t.Errorf("%s floor %d: %v %q", tc.pod, tc.floor, ok, reason)
		}
	}
}

func TestSteerZone(t *testing.T) {
	// The rollout of the issue: zone-a holds two old pods, zone-b one;
	// the new revision's pods are named new-*.
	old := []Member{
		{Pod: "p/old-1", Zone: "zone-a", Healthy: true},
		{Pod: "p/old-2", Zone: "zone-b", Healthy: true},
		{Pod: "p/old-3", Zone: "zone-a", Healthy: true},
	}
	isNew := func(pod string) bool { return strings.HasPrefix(pod, "p/new-") }
	for _, tc := range []struct {
		name  string
		ms    []Member
		floor int
		want  string
	}{
		{"first surge pod: the zone with the fewest healthy", old, 1, "zone-b"},
		{"floor off", old, 0, ""},
		{"second surge pod: zone-a has no new pod yet", []Member{
			{Pod: "p/old-3", Zone: "zone-a", Healthy: true},
			{Pod: "p/new-1", Zone: "zone-b", Healthy: true},
		}, 1, "zone-a"},
		{"a new pod on its way counts", []Member{
			{Pod: "p/old-2", Zone: "zone-b", Healthy: true},
			{Pod: "p/old-3", Zone: "zone-a", Healthy: true},
			{Pod: "p/new-1", Zone: "zone-b", Healthy: false},
		}, 1, "zone-a"},
		{"every zone has its new pods", []Member{
			{Pod: "p/old-3", Zone: "zone-a", Healthy: true},
			{Pod: "p/new-1", Zone: "zone-b", Healthy: true},
			{Pod: "p/new-2", Zone: "zone-a", Healthy: true},
		}, 1, ""},
		{"floor 2", []Member{
			{Pod: "p/new-1", Zone: "zone-a", Healthy: true},
			{Pod: "p/new-2", Zone: "zone-a", Healthy: true},
			{Pod: "p/new-3", Zone: "zone-b", Healthy: true},
			{Pod: "p/old-1", Zone: "zone-b", Healthy: true},
		}, 2, "zone-b"},
		{"no rollout (a scale-up): never steered", []Member{
			{Pod: "p/new-1", Zone: "zone-a", Healthy: true},
			{Pod: "p/new-2", Zone: "zone-a", Healthy: true},
			{Pod: "p/new-3", Zone: "zone-b", Healthy: true},
		}, 2, ""},
		{"unknown zone never picked", []Member{{Pod: "p/old-1", Zone: "", Healthy: true}}, 1, ""},
		{"ties by name", []Member{
			{Pod: "p/old-1", Zone: "zone-b", Healthy: true},
			{Pod: "p/old-2", Zone: "zone-a", Healthy: true},
		}, 1, "zone-a"},
		{"no members", nil, 1, ""},
	} {
		if got := SteerZone(tc.ms, isNew, tc.floor); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
