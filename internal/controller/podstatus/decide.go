package podstatus

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"sluice.dev/sluice/api/v1alpha1"
	state "sluice.dev/sluice/internal/controller/snapshot"
	"sluice.dev/sluice/internal/lb"
)

// View is one binding that selects the pod: its settings (defaults applied)
// and its latest snapshot (nil before its first reconcile).
type View struct {
	Binding      string // "namespace/name", for messages
	Gate         bool
	Handshake    bool
	DrainTimeout time.Duration
	Snap         *state.Snapshot
}

// Condition is a pod condition to write.
type Condition struct {
	Status  corev1.ConditionStatus
	Reason  string
	Message string
}

// Decision is what Decide wants done to a pod.
type Decision struct {
	// Gate is the sluice.dev/load-balancer-healthy condition to write;
	// nil leaves it as it is.
	Gate *Condition
	// Drained is the sluice.dev/drained condition to write; nil leaves it.
	Drained *Condition
	// Wait, when positive, asks to look at the pod again after it.
	Wait time.Duration
}

// recheck is how often a pod still waiting on the load balancer is looked
// at again even without news from a binding reconcile.
const recheck = 2 * time.Second

// Decide computes a pod's readiness-gate and drained conditions from the
// bindings selecting it. It is pure: the pod, the views and the time in,
// the conditions out.
//
// Gate (pods listing the readiness gate, not being deleted): True once
// every binding with readinessGate reports the pod's target healthy in
// every one of its groups; False
// as soon as one reports it anything else (or no such binding selects the
// pod); unchanged while a binding has not yet seen the pod, so a restarted
// controller never flips a Ready pod on missing knowledge.
//
// Drained (pods being deleted, when some binding has the handshake on):
// True once every such binding has seen the deletion and none of its
// groups lists the pod's target any more (or lists it Unused), or its drain timeout has passed
// since the deletionTimestamp. In an Instance binding the pod's target is
// its node's: the pod waits for the node target's drain when it was the
// node's last live selected pod, and is drained at once when the node
// target stays for the node's other pods (TargetStays).
func Decide(pod *corev1.Pod, views []View, now time.Time) Decision {
	var d Decision
	if pod.DeletionTimestamp == nil {
		if declaresGate(pod) {
			d.Gate, d.Wait = decideGate(pod, views)
		}
	} else {
		d.Drained, d.Wait = decideDrain(pod, views, now)
	}
	return d
}

func declaresGate(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool {
		return g.ConditionType == v1alpha1.ReadinessGateHealthy
	})
}

func findCondition(pod *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == typ {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func decideGate(pod *corev1.Pod, views []View) (*Condition, time.Duration) {
	cur := findCondition(pod, v1alpha1.ReadinessGateHealthy)
	var healthy, bad, unknown []string
	for _, v := range views {
		if !v.Gate {
			continue
		}
		s := v.Snap
		if !s.Synced() {
			unknown = append(unknown, v.Binding+": not synced with its load balancer yet")
			continue
		}
		pt, ok := s.Pods[pod.Name]
		if !ok || pt.UID != pod.UID {
			unknown = append(unknown, v.Binding+": has not seen the pod yet")
			continue
		}
		if !pt.Desired {
			bad = append(bad, v.Binding+": the pod is not a target (no IP yet, or its node is leaving the load balancer, or in instance mode: no ready selected pod on the node yet)")
			continue
		}
		if msgs := notHealthy(s, pt.Target); len(msgs) > 0 {
			for _, m := range msgs {
				bad = append(bad, v.Binding+inZone(pt.Target.Zone)+": "+m)
			}
			continue
		}
		healthy = append(healthy, v.Binding+inZone(pt.Target.Zone))
	}
	var want Condition
	switch {
	case len(bad) > 0:
		want = Condition{corev1.ConditionFalse, "TargetNotHealthy", strings.Join(append(bad, unknown...), "; ")}
	case len(unknown) > 0:
		if cur != nil {
			return nil, recheck // keep what we said until every binding has looked
		}
		want = Condition{corev1.ConditionFalse, "Pending", strings.Join(unknown, "; ")}
	case len(healthy) == 0:
		want = Condition{corev1.ConditionFalse, "NoBinding", "no LoadBalancerBinding with readinessGate selects this pod"}
	default:
		want = Condition{corev1.ConditionTrue, "TargetHealthy", "target healthy in " + strings.Join(healthy, ", ")}
	}
	var wait time.Duration
	if want.Status != corev1.ConditionTrue {
		wait = recheck
	}
	if same(cur, want) {
		return nil, wait
	}
	return &want, wait
}

// inZone names a target's zone in the gate's message, so that a surge
// pod's condition says which zone it adds a healthy target to.
func inZone(zone string) string {
	if zone == "" {
		return ""
	}
	return " (zone " + zone + ")"
}

func decideDrain(pod *corev1.Pod, views []View, now time.Time) (*Condition, time.Duration) {
	cur := findCondition(pod, v1alpha1.PodConditionDrained)
	if cur != nil && cur.Status == corev1.ConditionTrue {
		return nil, 0
	}
	elapsed := now.Sub(pod.DeletionTimestamp.Time)
	var any bool
	var timedOut, waiting, stays []string
	wait := recheck
	for _, v := range views {
		if !v.Handshake {
			continue
		}
		any = true
		if elapsed >= v.DrainTimeout {
			timedOut = append(timedOut, v.Binding)
			continue
		}
		wait = min(wait, v.DrainTimeout-elapsed)
		s := v.Snap
		if s == nil {
			waiting = append(waiting, v.Binding)
			continue
		}
		pt, ok := s.Pods[pod.Name]
		if !ok || pt.UID != pod.UID || !pt.Deleting {
			waiting = append(waiting, v.Binding) // has not seen the deletion yet
			continue
		}
		if !pt.HasTarget {
			continue
		}
		if pt.TargetStays {
			stays = append(stays, v.Binding)
			continue
		}
		if listedIn(s, pt.Target) {
			waiting = append(waiting, v.Binding)
		}
	}
	switch {
	case !any:
		return nil, 0
	case len(waiting) > 0:
		return nil, max(wait, time.Millisecond)
	case len(timedOut) > 0:
		return &Condition{corev1.ConditionTrue, "Timeout", "drain timeout passed for " + strings.Join(timedOut, ", ")}, 0
	case len(stays) > 0:
		return &Condition{corev1.ConditionTrue, "NodeTargetStays", "the node's target stays registered for the node's other replicas in " + strings.Join(stays, ", ")}, 0
	default:
		return &Condition{corev1.ConditionTrue, "Deregistered", "no load balancer sends the pod new traffic"}, 0
	}
}

// notHealthy explains, group by group, why target is not healthy in
// every group of s; nil when it is. Group names are given only when the
// binding has several.
func notHealthy(s *state.Snapshot, t lb.Target) []string {
	var out []string
	for i := range s.Groups {
		g := &s.Groups[i]
		in := ""
		if len(s.Groups) > 1 {
			in = " in " + g.Name
		}
		st, ok := g.Status(t)
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("target %s is not registered%s", t, in))
		case st.State != lb.Healthy:
			msg := fmt.Sprintf("target %s is %s%s", t, st.State, in)
			if st.Reason != "" {
				msg += " (" + st.Reason + ")"
			}
			out = append(out, msg)
		}
	}
	return out
}

// listedIn reports whether any group of s still lists t (other than
// Unused): the load balancer has not let go of it yet.
func listedIn(s *state.Snapshot, t lb.Target) bool {
	for i := range s.Groups {
		if st, ok := s.Groups[i].Status(t); ok && st.State != lb.Unused {
			return true
		}
	}
	return false
}

func same(cur *corev1.PodCondition, want Condition) bool {
	return cur != nil && cur.Status == want.Status && cur.Reason == want.Reason && cur.Message == want.Message
}
