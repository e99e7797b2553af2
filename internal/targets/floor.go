package targets

import (
	"cmp"
	"fmt"
)

// The zone floor: each zone keeps at least floor healthy targets while
// targets leave. Two pure decisions use it: which pods a ReplicaSet should
// delete first (pod-deletion-cost) and whether an eviction may go ahead.

// AnnotationDeletionCost is the ReplicaSet controller's pod-deletion-cost
// annotation: among ready pods, lower costs are deleted first.
const AnnotationDeletionCost = "controller.kubernetes.io/pod-deletion-cost"

// Deletion costs the floor gives. Between CostSurplus and CostFloor the
// cost grows as the zone's surplus shrinks, so the zone with the most
// healthy targets above its floor loses a pod first.
const (
	CostNotHealthy = 0     // no healthy target: goes first
	CostSurplus    = 1000  // a healthy pod in a zone with a surplus of one; more surplus, lower cost
	CostFloor      = 10000 // a healthy pod its zone cannot spare
)

// Member is one live pod of a binding as the floor sees it.
type Member struct {
	Pod  string // namespace/name
	Zone string // "" when unknown: all such pods form one zone
	// Healthy: the pod's target is healthy in every group of the binding.
	Healthy bool
}

// ZoneHealthy counts the healthy members of each zone.
func ZoneHealthy(ms []Member) map[string]int {
	out := map[string]int{}
	for _, m := range ms {
		if m.Healthy {
			out[m.Zone]++
		} else if _, ok := out[m.Zone]; !ok {
			out[m.Zone] = 0
		}
	}
	return out
}

// DeletionCosts gives each member the pod-deletion-cost that makes a
// ReplicaSet scale down pods without a healthy target first, then healthy
// pods of the zones with the largest surplus above floor, and never a pod
// whose zone would drop below floor while another choice exists. floor <=
// 0 returns nil (the floor is off).
func DeletionCosts(ms []Member, floor int) map[string]int32 {
	if floor <= 0 {
		return nil
	}
	healthy := ZoneHealthy(ms)
	out := make(map[string]int32, len(ms))
	for _, m := range ms {
		surplus := healthy[m.Zone] - floor
		switch {
		case !m.Healthy:
			out[m.Pod] = CostNotHealthy
		case surplus <= 0:
			out[m.Pod] = CostFloor
		default:
			out[m.Pod] = int32(CostSurplus - min(surplus, CostSurplus-1) + 1)
		}
	}
	return out
}

// Evictable decides an eviction of pod: refused (with the reason) when the
// pod is healthy and its zone would keep fewer than floor healthy
// targets. Pods the binding does not know, unhealthy pods and floor <= 0
// are always evictable.
func Evictable(ms []Member, pod string, floor int) (bool, string) {
	if floor <= 0 {
		return true, ""
	}
	var me *Member
	for i := range ms {
		if ms[i].Pod == pod {
			me = &ms[i]
		}
	}
	if me == nil || !me.Healthy {
		return true, ""
	}
	left := ZoneHealthy(ms)[me.Zone] - 1
	if left >= floor {
		return true, ""
	}
	return false, fmt.Sprintf("evicting %s would leave zone %q with %d healthy load-balancer targets, below the floor of %d; "+
		"the eviction can go ahead once another target in that zone is healthy", pod, cmp.Or(me.Zone, "(unknown)"), left, floor)
}

// SteerZone picks the zone a new pod should be placed in for the floor,
// or "" when any zone will do. sameRevision tells the members of the new
// pod's revision (its ReplicaSet) from the others. A zone is short when it
// holds fewer than floor live pods of that revision: in a rollout its older
// pods will all go, and the floor then rests on the new ones. Of the short
// zones among those the members occupy (known zones only), the one with the
// fewest healthy members is picked (then by name): the one a scale-down
// would empty first. Only during a rollout (some member is of another
// revision); floor <= 0 returns "".
func SteerZone(ms []Member, sameRevision func(pod string) bool, floor int) string {
	if floor <= 0 {
		return ""
	}
	healthy := ZoneHealthy(ms)
	same := map[string]int{}
	rollout := false
	for _, m := range ms {
		if sameRevision(m.Pod) {
			same[m.Zone]++
		} else {
			rollout = true
		}
	}
	if !rollout {
		return "" // a scale-up or a replacement: nothing old will go
	}
	best := ""
	for zone := range healthy {
		if zone == "" || same[zone] >= floor {
			continue
		}
		if best == "" || healthy[zone] < healthy[best] || healthy[zone] == healthy[best] && zone < best {
			best = zone
		}
	}
	return best
}
