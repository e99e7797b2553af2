package binding

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"sluice.dev/sluice/api/v1alpha1"
	state "sluice.dev/sluice/internal/controller/snapshot"
	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/targets"
)

// DefaultDrainTimeout bounds the drain handshake when the binding does not.
const DefaultDrainTimeout = 5 * time.Minute

func targetSpec(b *v1alpha1.LoadBalancerBinding) targets.Spec {
	spec := targets.Spec{Type: targets.TargetType(b.Spec.TargetType), Port: b.Spec.Port}
	if p := b.Spec.HealthCheckPort; p != nil && *p >= 1 && *p <= 65535 && spec.Type == targets.Instance {
		spec.CheckPort = uint16(*p)
	}
	return spec
}

// Settings returns a binding's readiness-gate and drain settings with the
// defaults applied.
func Settings(b *v1alpha1.LoadBalancerBinding) (gate, handshake bool, timeout time.Duration) {
	gate = b.Spec.ReadinessGate == nil || *b.Spec.ReadinessGate
	handshake = b.Spec.Drain.Handshake == nil || *b.Spec.Drain.Handshake
	timeout = DefaultDrainTimeout
	if t := b.Spec.Drain.Timeout; t != nil && t.Duration >= 0 {
		timeout = t.Duration
	}
	return gate, handshake, timeout
}

// newSnapshot records which pod has which target; the reconcile adds the
// groups as it syncs them. In an Instance binding a pod's target is its
// node's (targets.NodeTarget): desired while the pod is live and the node
// target is desired; a deleting pod whose node target stays desired (the
// node's other pods keep it) is marked TargetStays.
func newSnapshot(b *v1alpha1.LoadBalancerBinding, spec targets.Spec, pods []*corev1.Pod, nodes map[string]*corev1.Node, desired []lb.Target) *state.Snapshot {
	gate, handshake, timeout := Settings(b)
	snap := &state.Snapshot{
		Binding:       types.NamespacedName{Namespace: b.Namespace, Name: b.Name},
		Generation:    b.Generation,
		ReadinessGate: gate,
		Handshake:     handshake,
		DrainTimeout:  timeout,
		Instance:      spec.Type == targets.Instance,
		Pods:          make(map[string]state.PodTarget, len(pods)),
	}
	for _, p := range pods {
		pt := state.PodTarget{UID: p.UID, Deleting: p.DeletionTimestamp != nil}
		pt.Target, pt.HasTarget = podTarget(spec, p, nodes)
		if i := slices.IndexFunc(desired, pt.Target.Same); pt.HasTarget && i >= 0 {
			pt.Target.Zone = desired[i].Zone // the node's zone (the zone floor)
			pt.Desired = live(p)
			pt.TargetStays = snap.Instance && !pt.Desired
		}
		snap.Pods[p.Name] = pt
	}
	return snap
}

// afterPlan is current with the plan applied: registered targets Initial
// (added even if Register failed part-way: the provider may hold them),
// deregistered ones Draining until a listing no longer shows them.
func afterPlan(current []lb.Status, plan targets.Plan) []lb.Status {
	out := slices.Clone(current)
	for _, t := range plan.Register {
		i := slices.IndexFunc(out, func(s lb.Status) bool { return s.Target.Same(t) })
		if i < 0 {
			out = append(out, lb.Status{Target: t, State: lb.Initial, Connections: -1})
			continue
		}
		out[i].State, out[i].Reason = lb.Initial, ""
	}
	for _, t := range plan.Deregister {
		for i := range out {
			if out[i].Target.Same(t) && out[i].State != lb.Unused {
				out[i].State = lb.Draining
			}
		}
	}
	slices.SortStableFunc(out, func(a, b lb.Status) int { return a.Target.Compare(b.Target) })
	return out
}

func live(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// podTarget is the target a pod has, or had before its deletion started:
// targets.Desired on a copy of the pod that is not being deleted, with no
// node exclusions for IP targets; its node's target for Instance targets
// (a node target serves all the node's pods and outlives any one of them).
// Finished pods have none.
func podTarget(spec targets.Spec, p *corev1.Pod, nodes map[string]*corev1.Node) (lb.Target, bool) {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return lb.Target{}, false
	}
	if spec.Type == targets.Instance {
		return targets.NodeTarget(spec, nodes[p.Spec.NodeName])
	}
	cp := *p
	cp.DeletionTimestamp = nil
	ts, _ := targets.Desired(spec, []*corev1.Pod{&cp}, nil)
	if len(ts) != 1 {
		return lb.Target{}, false
	}
	return ts[0], true
}

func problemStrings(ps []targets.Problem) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// announceProblems emits an Event for every new problem.
func (r *Reconciler) announceProblems(b *v1alpha1.LoadBalancerBinding, snap, prev *state.Snapshot) {
	var prevProblems []string
	if prev != nil {
		prevProblems = prev.Problems
	}
	for _, p := range snap.Problems {
		if !slices.Contains(prevProblems, p) {
			r.event(b, nil, corev1.EventTypeWarning, "InvalidTarget", "Sync", p)
		}
	}
}

// announce emits Events and register-latency observations for what this
// reconcile changed in one group (current is its listing before plan).
func (r *Reconciler) announce(b *v1alpha1.LoadBalancerBinding, snap *state.Snapshot, groupID string,
	current []lb.Status, plan targets.Plan, registered bool, pods []*corev1.Pod) {
	podOf := func(t lb.Target) *corev1.Pod {
		if snap.Instance {
			return nil // a node target is no one pod's
		}
		for _, p := range pods {
			if pt := snap.Pods[p.Name]; pt.HasTarget && pt.Target.Same(t) {
				return p
			}
		}
		return nil
	}
	group := groupName(b, groupID)
	now := r.opts.Now()
	if registered && len(plan.Register) > 0 {
		for _, t := range plan.Register {
			p := podOf(t)
			if p == nil {
				continue
			}
			r.event(p, b, corev1.EventTypeNormal, "Registered", "Register", fmt.Sprintf("registered %s in %s", t, group))
			key := podKey(p)
			if r.opts.Timeline.Registered(key, p.UID, now) {
				if at, ok := r.opts.Timeline.IPAssigned(key, p.UID, ipConditionTime(p)); ok {
					r.metrics.registerLatency.Observe(max(now.Sub(at), 0).Seconds())
				}
			}
		}
		r.event(b, nil, corev1.EventTypeNormal, "Registered", "Register", "registered "+joinTargets(plan.Register)+" in "+group)
		r.log.Info("registered targets", "binding", snap.Binding, "group", group, "targets", joinTargets(plan.Register))
	}
	var first []lb.Target // deregistrations that start a drain
	for _, t := range plan.Deregister {
		i := slices.IndexFunc(current, func(s lb.Status) bool { return s.Target.Same(t) })
		if i >= 0 && current[i].State != lb.Draining {
			first = append(first, t)
			if p := podOf(t); p != nil {
				r.event(p, b, corev1.EventTypeNormal, "Deregistered", "Deregister", fmt.Sprintf("deregistered %s from %s", t, group))
			}
		}
	}
	if len(first) > 0 {
		r.event(b, nil, corev1.EventTypeNormal, "Deregistered", "Deregister", "deregistered "+joinTargets(first)+" from "+group)
		r.log.Info("deregistered targets", "binding", snap.Binding, "group", group, "targets", joinTargets(first))
	}
}

// ipConditionTime is when the pod's sandbox (and so its IP) became ready,
// from the PodReadyToStartContainers condition; zero if unknown.
func ipConditionTime(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReadyToStartContainers && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// groupName names a group for Events and logs.
func groupName(b *v1alpha1.LoadBalancerBinding, group string) string {
	switch {
	case b.Spec.Provider.HAProxy != nil:
		return "haproxy backend " + group
	case b.Spec.Provider.AWS != nil:
		return "target group " + group
	default:
		return group
	}
}

func joinTargets(ts []lb.Target) string {
	const most = 10
	parts := make([]string, 0, min(len(ts), most)+1)
	for i, t := range ts {
		if i == most {
			parts = append(parts, fmt.Sprintf("and %d more", len(ts)-most))
			break
		}
		parts = append(parts, t.String())
	}
	return cmp.Or(strings.Join(parts, ", "), "nothing")
}
