package targets

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"sluice.dev/sluice/internal/lb"
)

// Held is a Plan's deregistrations that the emptying guard holds back.
type Held struct {
	// Targets are held: they stay in the group as they are.
	Targets []lb.Target
	// Healthy is the group's healthy targets before the plan; Leaving is
	// how many of them the plan would deregister while their pods stay
	// (a spec edit), Allowed how many it may.
	Healthy, Leaving, Allowed int
}

// String says why the targets are held, for conditions and Events.
func (h Held) String() string {
	if len(h.Targets) == 0 {
		return ""
	}
	return fmt.Sprintf("deregistering %d of %d healthy targets whose pods still run (at most %d at once) is held: %d targets kept",
		h.Leaving, h.Healthy, h.Allowed, len(h.Targets))
}

// Guard is the emptying guard: it holds back a plan's deregistrations of
// targets whose pod (or node) still runs (stays reports it), the ones a
// spec edit causes, when they would take more than maxFraction of the
// group's healthy targets (a count, or a percentage rounded down) or all
// of them. Deregistrations of targets whose pods are gone or deleting
// always go ahead: a rollout or scale-down is never held. It returns the
// plan that may be applied and what it held (nothing when within bounds).
// A maxFraction that does not parse counts as the default, 50%.
func Guard(plan Plan, current []lb.Status, stays func(lb.Target) bool, maxFraction intstr.IntOrString) (Plan, Held) {
	healthy := map[lb.Target]bool{}
	h := Held{}
	for _, s := range current {
		if s.State == lb.Healthy {
			healthy[key(s.Target)] = true
			h.Healthy++
		}
	}
	var spec []lb.Target // deregistered by a spec edit
	healthyLeft := h.Healthy
	for _, t := range plan.Deregister {
		if healthy[key(t)] {
			healthyLeft--
		}
		if stays(t) {
			spec = append(spec, t)
			if healthy[key(t)] {
				h.Leaving++
			}
		}
	}
	allowed, err := intstr.GetScaledValueFromIntOrPercent(&maxFraction, h.Healthy, false)
	if err != nil || allowed < 0 {
		def := intstr.FromString("50%")
		allowed, _ = intstr.GetScaledValueFromIntOrPercent(&def, h.Healthy, false)
	}
	h.Allowed = allowed
	if h.Leaving == 0 || (h.Leaving <= allowed && healthyLeft > 0) {
		return plan, Held{}
	}
	out := plan
	out.Deregister = slices.DeleteFunc(slices.Clone(plan.Deregister), stays)
	h.Targets = spec
	return out, h
}

// key drops the zone, which takes no part in a target's identity.
func key(t lb.Target) lb.Target {
	t.Zone = ""
	return t
}

// Staying returns the guard's stays function for the pods of a binding's
// namespace (selected or not): a target stays while a live pod (not
// deleting, not finished) on a node that is not leaving the load balancer
// has its IP (IP targets) or runs on its node (Instance targets, matched by
// the node's InternalIP).
func Staying(pods []*corev1.Pod, nodes map[string]*corev1.Node) func(lb.Target) bool {
	ips := map[netip.Addr]bool{}
	for _, pod := range pods {
		if pod == nil || !live(pod) {
			continue
		}
		node := nodes[pod.Spec.NodeName]
		if node != nil && excluded(node) {
			continue
		}
		if ip, err := netip.ParseAddr(pod.Status.PodIP); err == nil {
			ips[ip.Unmap()] = true
		}
		if node != nil {
			if ip, ok := internalIP(node); ok {
				ips[ip] = true
			}
		}
	}
	return func(t lb.Target) bool { return ips[t.Address.Addr().Unmap()] }
}
