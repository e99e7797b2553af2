package snapshot

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"sluice.dev/sluice/internal/lb"
)

func target(ip string) lb.Target {
	return lb.Target{Address: netip.AddrPortFrom(netip.MustParseAddr(ip), 80)}
}

func snapshot(gen int64, states map[string]lb.State, pods map[string]string) *Snapshot {
	s := &Snapshot{Binding: types.NamespacedName{Namespace: "ns", Name: "b"}, Generation: gen, Groups: []Group{{Name: "g", Synced: true}}, Pods: map[string]PodTarget{}}
	for ip, st := range states {
		s.Groups[0].Targets = append(s.Groups[0].Targets, lb.Status{Target: target(ip), State: st})
	}
	for name, ip := range pods {
		s.Pods[name] = PodTarget{UID: types.UID(name), Target: target(ip), HasTarget: true, Desired: true}
	}
	return s
}

func withGroup(s *Snapshot, g Group) *Snapshot {
	s.Groups = append(s.Groups, g)
	return s
}

func TestSnapshotGroups(t *testing.T) {
	var none *Snapshot
	if none.Synced() || none.Group("g") != nil {
		t.Error("nil snapshot synced or with a group")
	}
	s := withGroup(snapshot(1, map[string]lb.State{"10.0.0.1": lb.Healthy}, nil), Group{Name: "g2"})
	if s.Synced() {
		t.Error("synced with a group never listed")
	}
	s.Groups[1].Synced = true
	s.Groups[1].Targets = []lb.Status{{Target: target("10.0.0.1"), State: lb.Draining}}
	if !s.Synced() || len(s.Targets()) != 2 {
		t.Errorf("synced %v, targets %v", s.Synced(), s.Targets())
	}
	if st, ok := s.Group("g2").Status(target("10.0.0.1")); !ok || st.State != lb.Draining {
		t.Errorf("g2 status %+v %v", st, ok)
	}
	if (&Snapshot{}).Synced() {
		t.Error("a snapshot without groups is synced")
	}
}

func names(ps []types.NamespacedName) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

func TestStorePutReportsChangedPods(t *testing.T) {
	s := NewStore()
	pods := map[string]string{"a": "10.0.0.1", "b": "10.0.0.2"}
	steps := []struct {
		name string
		snap *Snapshot
		want []string
	}{
		{"first snapshot: every pod", snapshot(1, map[string]lb.State{"10.0.0.1": lb.Initial, "10.0.0.2": lb.Initial}, pods), []string{"a", "b"}},
		{"same again: none", snapshot(1, map[string]lb.State{"10.0.0.1": lb.Initial, "10.0.0.2": lb.Initial}, pods), nil},
		{"a healthy", snapshot(1, map[string]lb.State{"10.0.0.1": lb.Healthy, "10.0.0.2": lb.Initial}, pods), []string{"a"}},
		{"b removed from listing", snapshot(1, map[string]lb.State{"10.0.0.1": lb.Healthy}, pods), []string{"b"}},
		{"pod b gone", snapshot(1, map[string]lb.State{"10.0.0.1": lb.Healthy}, map[string]string{"a": "10.0.0.1"}), []string{"b"}},
		{"a second group listing a", withGroup(snapshot(1, map[string]lb.State{"10.0.0.1": lb.Healthy}, map[string]string{"a": "10.0.0.1"}),
			Group{Name: "g2", Synced: true, Targets: []lb.Status{{Target: target("10.0.0.1"), State: lb.Initial}}}), []string{"a"}},
		{"a healthy in the second group", withGroup(snapshot(1, map[string]lb.State{"10.0.0.1": lb.Healthy}, map[string]string{"a": "10.0.0.1"}),
			Group{Name: "g2", Synced: true, Targets: []lb.Status{{Target: target("10.0.0.1"), State: lb.Healthy}}}), []string{"a"}},
		{"same again (two groups): none", withGroup(snapshot(1, map[string]lb.State{"10.0.0.1": lb.Healthy}, map[string]string{"a": "10.0.0.1"}),
			Group{Name: "g2", Synced: true, Targets: []lb.Status{{Target: target("10.0.0.1"), State: lb.Healthy}}}), nil},
		{"second group not synced any more: every pod", withGroup(snapshot(1, map[string]lb.State{"10.0.0.1": lb.Healthy}, map[string]string{"a": "10.0.0.1"}),
			Group{Name: "g2", Targets: []lb.Status{{Target: target("10.0.0.1"), State: lb.Healthy}}}), []string{"a"}},
	}
	for _, st := range steps {
		if got := names(s.Put(st.snap)); !slices.Equal(got, st.want) {
			t.Errorf("%s: changed %v, want %v", st.name, got, st.want)
		}
	}
	if got := names(s.Delete(types.NamespacedName{Namespace: "ns", Name: "b"})); !slices.Equal(got, []string{"a"}) {
		t.Errorf("Delete: %v", got)
	}
	if s.Get(types.NamespacedName{Namespace: "ns", Name: "b"}) != nil {
		t.Error("deleted snapshot still there")
	}
}

func TestTimeline(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := types.NamespacedName{Namespace: "ns", Name: "p"}
	fallback := t0.Add(-time.Second)

	tl := NewTimeline()
	tl.Observe(pod, "u1", false, false, t0)
	tl.Observe(pod, "u1", true, false, t0.Add(2*time.Second))
	if at, ok := tl.IPAssigned(pod, "u1", fallback); !ok || !at.Equal(t0.Add(2*time.Second)) {
		t.Errorf("witnessed IP: %v %v", at, ok)
	}
	if !tl.Registered(pod, "u1", t0.Add(3*time.Second)) || tl.Registered(pod, "u1", t0.Add(4*time.Second)) {
		t.Error("Registered should record only the first time")
	}
	if at, ok := tl.RegisteredAt(pod, "u1"); !ok || !at.Equal(t0.Add(3*time.Second)) {
		t.Errorf("RegisteredAt: %v %v", at, ok)
	}
	tl.Observe(pod, "u1", true, true, t0.Add(5*time.Second))
	if at, ok := tl.DeletionSeen(pod, "u1"); !ok || !at.Equal(t0.Add(5*time.Second)) {
		t.Errorf("DeletionSeen: %v %v", at, ok)
	}
	// A new pod with the same name starts over.
	if _, ok := tl.RegisteredAt(pod, "u2"); ok {
		t.Error("new UID inherited the registration")
	}

	// First seen with an IP (e.g. after a restart): the fallback wins.
	tl = NewTimeline()
	tl.Observe(pod, "u1", true, true, t0)
	if at, _ := tl.IPAssigned(pod, "u1", fallback); !at.Equal(fallback) {
		t.Errorf("unwitnessed IP: %v", at)
	}
	if _, ok := tl.DeletionSeen(pod, "u1"); ok {
		t.Error("deletion seen without ever seeing the pod live")
	}
	tl.Forget(pod)
	if at, ok := tl.IPAssigned(pod, "u1", time.Time{}); ok {
		t.Errorf("forgotten pod: %v", at)
	}
}
