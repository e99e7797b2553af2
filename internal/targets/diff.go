package targets

import (
	"net/netip"
	"slices"

	"sluice.dev/sluice/internal/lb"
)

// Plan is what to tell a provider so that a group holds the desired targets.
type Plan struct {
	// Register: desired targets the group lacks, or holds only as Draining
	// or Unused (desired again: back into service).
	Register []lb.Target
	// Deregister: listed targets no longer desired, Draining ones
	// included, because providers advance a drain on each call (see
	// lb.Provider.Deregister). Unused ones are left alone.
	Deregister []lb.Target
	// Keep: desired targets the group already serves or checks, with
	// their current status (the controller's readiness gates read it).
	Keep []lb.Status
}

// Empty reports whether the plan changes nothing.
func (p Plan) Empty() bool { return len(p.Register) == 0 && len(p.Deregister) == 0 }

type idPort struct {
	id   string
	port uint16
}

// Diff compares desired targets with a provider's list. Targets match as
// lb.Target.Same says: by ID and port when both sides carry an ID, by
// address otherwise. What is desired is never deregistered. Each list in the
// plan is sorted (lb.Target.Compare), so equal inputs give equal plans.
func Diff(desired []lb.Target, current []lb.Status) Plan {
	byID := map[idPort][]int{}
	byAddr := map[netip.AddrPort][]int{}
	for i, c := range current {
		if c.Target.ID != "" {
			k := idPort{c.Target.ID, c.Target.Address.Port()}
			byID[k] = append(byID[k], i)
		}
		byAddr[c.Target.Address] = append(byAddr[c.Target.Address], i)
	}
	matched := make([]bool, len(current))
	var plan Plan
	for _, d := range dedupe(slices.Clone(desired)) {
		var cands []int
		if d.ID != "" {
			cands = append(cands, byID[idPort{d.ID, d.Address.Port()}]...)
		}
		for _, i := range byAddr[d.Address] {
			if d.ID == "" || current[i].Target.ID == "" {
				cands = append(cands, i)
			}
		}
		keep := -1
		for _, i := range cands {
			matched[i] = true
			if keep < 0 && active(current[i].State) {
				keep = i
			}
		}
		if keep >= 0 {
			plan.Keep = append(plan.Keep, current[keep])
		} else {
			plan.Register = append(plan.Register, d)
		}
	}
	for i, c := range current {
		if !matched[i] && c.State != lb.Unused {
			plan.Deregister = append(plan.Deregister, c.Target)
		}
	}
	plan.Deregister = dedupe(plan.Deregister)
	slices.SortStableFunc(plan.Keep, func(a, b lb.Status) int { return a.Target.Compare(b.Target) })
	return plan
}

// active: in the group and meant to take traffic (or about to).
func active(s lb.State) bool {
	return s != lb.Draining && s != lb.Unused
}
