// Package snapshot holds what the sluice controller last learned, shared
// between its reconcilers: per binding, a Snapshot of the provider's targets
// after the last reconcile and of which pod maps to which target (written by
// the binding reconciler, read by the pod-status reconciler); per pod, a
// Timeline of lifecycle instants for the latency metrics.
//
// A binding may front several groups (e.g. an internal and an
// internet-facing target group); a Snapshot keeps each group's listing
// apart, so that a pod counts as healthy only when it is healthy in every
// group, and as drained only once it has left every group.
//
// Nothing here is the source of truth: every Snapshot is rebuilt from the
// provider's listings on the next binding reconcile, so a restarted
// controller loses only metric timestamps.
//
//	binding reconciler ─► Store.Put(Snapshot) ─► changed pods ─► pod-status reconciler ─► Store.Get
package snapshot

import (
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"sluice.dev/sluice/internal/lb"
)

// PodTarget is one selected pod as a binding reconcile saw it.
type PodTarget struct {
	// UID tells a pod from a later one with the same name.
	UID types.UID
	// Target is the pod's target; valid only when HasTarget.
	Target lb.Target
	// HasTarget: the pod resolves to a target (it has an IP and the port
	// resolves). A deleting pod keeps the target it had, so the drain can
	// be followed.
	HasTarget bool
	// Desired: the target is wanted in the group (pod live, node not
	// excluded). Only desired targets count towards the readiness gate.
	Desired bool
	// Deleting: the pod had a deletionTimestamp when the binding looked.
	Deleting bool
	// TargetStays (Instance bindings): the pod's target is its node's,
	// and the node target is still wanted for the node's other selected
	// pods. A deleting pod then has nothing to wait for: the node's
	// target is not deregistered for it.
	TargetStays bool
}

// Group is one load-balancer group of a binding (an HAProxy backend, an
// ELBv2 target group) as the last reconcile left it.
type Group struct {
	// Name is the provider's name of the group (backend, target group ARN).
	Name string
	// Synced: Targets come from a successful provider listing (false until
	// the first one).
	Synced bool
	// Targets is the provider's listing adjusted by what the reconcile did
	// after it: registered targets are added as Initial, deregistered ones
	// turn Draining (they leave only when a later listing drops them).
	Targets []lb.Status
	// Err is the group's error in the last reconcile, nil if it succeeded.
	// Targets then stay those of the last successful listing.
	Err error
}

// Status returns the listed status of t in the group.
func (g *Group) Status(t lb.Target) (lb.Status, bool) {
	for _, st := range g.Targets {
		if st.Target.Same(t) {
			return st, true
		}
	}
	return lb.Status{}, false
}

// Snapshot is one binding's view after a reconcile. Treat it as immutable
// once stored.
type Snapshot struct {
	// Binding is the LoadBalancerBinding's namespace and name.
	Binding types.NamespacedName
	// Generation of the binding spec the snapshot reflects.
	Generation int64
	// ReadinessGate and Handshake are the binding's settings (defaults
	// applied); DrainTimeout is the drain handshake's upper bound.
	ReadinessGate bool
	Handshake     bool
	DrainTimeout  time.Duration
	// Instance: the binding registers nodes, not pods; each pod's target
	// is its node's, shared with the node's other selected pods.
	Instance bool
	// Groups are the binding's load-balancer groups, in the order the
	// binding names them. Every selected pod's target belongs in each.
	Groups []Group
	// Pods maps the selected pods' names to their targets.
	Pods map[string]PodTarget
	// Problems are the pods and spec details that could not become
	// targets, as text (targets.Problem), sorted.
	Problems []string
	// Err is the last reconcile's error (every group's, joined), nil if it
	// succeeded.
	Err error
}

// Synced reports whether every group has been listed successfully at
// least once (and there is a group).
func (s *Snapshot) Synced() bool {
	if s == nil || len(s.Groups) == 0 {
		return false
	}
	for _, g := range s.Groups {
		if !g.Synced {
			return false
		}
	}
	return true
}

// Group returns the named group, or nil.
func (s *Snapshot) Group(name string) *Group {
	if s == nil {
		return nil
	}
	for i := range s.Groups {
		if s.Groups[i].Name == name {
			return &s.Groups[i]
		}
	}
	return nil
}

// Targets returns every group's targets, one after the other (a target in
// two groups counts twice: it is two registrations).
func (s *Snapshot) Targets() []lb.Status {
	var out []lb.Status
	for _, g := range s.Groups {
		out = append(out, g.Targets...)
	}
	return out
}

// Store keeps the latest Snapshot of every binding. Safe for concurrent use.
type Store struct {
	mu    sync.RWMutex
	snaps map[types.NamespacedName]*Snapshot
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{snaps: map[types.NamespacedName]*Snapshot{}}
}

// Get returns the binding's snapshot, or nil if it has none yet.
func (s *Store) Get(binding types.NamespacedName) *Snapshot {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.snaps[binding]
}

// Put stores snap and returns the pods (namespace and name) whose view
// changed against the previous snapshot: added, removed, another target
// or state, deleting, or settings that decide their conditions.
func (s *Store) Put(snap *Snapshot) []types.NamespacedName {
	s.mu.Lock()
	old := s.snaps[snap.Binding]
	s.snaps[snap.Binding] = snap
	s.mu.Unlock()
	return changedPods(old, snap)
}

// Delete forgets a binding and returns its pods, whose conditions may
// now change.
func (s *Store) Delete(binding types.NamespacedName) []types.NamespacedName {
	s.mu.Lock()
	old := s.snaps[binding]
	delete(s.snaps, binding)
	s.mu.Unlock()
	return changedPods(old, nil)
}

func changedPods(old, cur *Snapshot) []types.NamespacedName {
	var ns string
	var oldPods, curPods map[string]PodTarget
	settings := old == nil || cur == nil
	if old != nil {
		ns, oldPods = old.Binding.Namespace, old.Pods
	}
	if cur != nil {
		ns, curPods = cur.Binding.Namespace, cur.Pods
		if old != nil {
			settings = old.ReadinessGate != cur.ReadinessGate || old.Handshake != cur.Handshake ||
				old.DrainTimeout != cur.DrainTimeout || old.Synced() != cur.Synced()
		}
	}
	var out []types.NamespacedName
	for name, p := range curPods {
		o, ok := oldPods[name]
		if settings || !ok || o != p || podState(old, o) != podState(cur, p) {
			out = append(out, types.NamespacedName{Namespace: ns, Name: name})
		}
	}
	for name := range oldPods {
		if _, ok := curPods[name]; !ok {
			out = append(out, types.NamespacedName{Namespace: ns, Name: name})
		}
	}
	return out
}

// podState is the listed state of a pod's target in every group, as one
// comparable string ("group=state;..."; "" state when not listed).
func podState(s *Snapshot, p PodTarget) string {
	if s == nil || !p.HasTarget {
		return ""
	}
	var b strings.Builder
	for i := range s.Groups {
		g := &s.Groups[i]
		st, _ := g.Status(p.Target)
		b.WriteString(g.Name)
		b.WriteByte('=')
		b.WriteString(string(st.State))
		b.WriteByte(';')
	}
	return b.String()
}

// Timeline records, per pod, the instants the latency metrics start from.
// It is best effort: a restarted controller starts empty and skips the
// observations it cannot time. Safe for concurrent use.
type Timeline struct {
	mu   sync.Mutex
	pods map[types.NamespacedName]*podTimes
}

type podTimes struct {
	uid        types.UID
	sawNoIP    bool      // seen before it had an IP
	ipAt       time.Time // first seen with an IP
	registered time.Time // first successful registration
	sawLive    bool      // seen without deletionTimestamp
	deletingAt time.Time // first seen deleting
}

// NewTimeline returns an empty Timeline.
func NewTimeline() *Timeline {
	return &Timeline{pods: map[types.NamespacedName]*podTimes{}}
}

func (t *Timeline) get(pod types.NamespacedName, uid types.UID) *podTimes {
	p := t.pods[pod]
	if p == nil || p.uid != uid {
		p = &podTimes{uid: uid}
		t.pods[pod] = p
	}
	return p
}

// Observe notes what a pod looks like at now: whether it has an IP and
// whether it is being deleted.
func (t *Timeline) Observe(pod types.NamespacedName, uid types.UID, hasIP, deleting bool, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.get(pod, uid)
	if !hasIP {
		p.sawNoIP = true
	} else if p.ipAt.IsZero() {
		p.ipAt = now
	}
	if !deleting {
		p.sawLive = true
	} else if p.deletingAt.IsZero() {
		p.deletingAt = now
	}
}

// IPAssigned returns when the pod got its IP: the instant the Timeline first
// saw it if it had seen the pod without one, else fallback (e.g. a pod
// condition's transition time) if not zero, else the first sighting.
func (t *Timeline) IPAssigned(pod types.NamespacedName, uid types.UID, fallback time.Time) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.get(pod, uid)
	switch {
	case p.sawNoIP && !p.ipAt.IsZero():
		return p.ipAt, true
	case !fallback.IsZero():
		return fallback, true
	default:
		return p.ipAt, !p.ipAt.IsZero()
	}
}

// Registered records the pod's first registration at now; it reports false
// if one was already recorded.
func (t *Timeline) Registered(pod types.NamespacedName, uid types.UID, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.get(pod, uid)
	if !p.registered.IsZero() {
		return false
	}
	p.registered = now
	return true
}

// RegisteredAt returns the pod's first registration, if recorded.
func (t *Timeline) RegisteredAt(pod types.NamespacedName, uid types.UID) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.get(pod, uid)
	return p.registered, !p.registered.IsZero()
}

// DeletionSeen returns when the pod was first seen deleting, if the
// Timeline had seen it live before (otherwise the caller should fall back
// to the deletionTimestamp).
func (t *Timeline) DeletionSeen(pod types.NamespacedName, uid types.UID) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.get(pod, uid)
	return p.deletingAt, p.sawLive && !p.deletingAt.IsZero()
}

// Forget drops a pod that no longer exists.
func (t *Timeline) Forget(pod types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pods, pod)
}
