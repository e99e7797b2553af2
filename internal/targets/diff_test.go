package targets

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/lb"
)

func ip(s string) lb.Target { return lb.Target{Address: netip.MustParseAddrPort(s)} }

func inst(id, addr string) lb.Target {
	t := lb.Target{ID: id}
	if strings.HasPrefix(addr, ":") {
		// AWS lists instance targets by ID and port only.
		var port uint16
		fmt.Sscanf(addr, ":%d", &port)
		t.Address = netip.AddrPortFrom(netip.Addr{}, port)
	} else {
		t.Address = netip.MustParseAddrPort(addr)
	}
	return t
}

func st(t lb.Target, s lb.State) lb.Status { return lb.Status{Target: t, State: s, Connections: -1} }

func dumpPlan(p Plan) string {
	var b strings.Builder
	for _, t := range p.Register {
		fmt.Fprintf(&b, "register %s\n", t)
	}
	for _, t := range p.Deregister {
		fmt.Fprintf(&b, "deregister %s\n", t)
	}
	for _, s := range p.Keep {
		fmt.Fprintf(&b, "keep %s %s\n", s.Target, s.State)
	}
	return b.String()
}

func TestDiff(t *testing.T) {
	for _, tc := range []struct {
		name    string
		desired []lb.Target
		current []lb.Status
		want    string
	}{{
		name: "empty",
		want: "",
	}, {
		name:    "first registration",
		desired: []lb.Target{ip("10.0.0.2:80"), ip("10.0.0.1:80")},
		want:    "register 10.0.0.1:80\nregister 10.0.0.2:80\n",
	}, {
		name:    "steady state keeps every live state",
		desired: []lb.Target{ip("10.0.0.1:80"), ip("10.0.0.2:80"), ip("10.0.0.3:80"), ip("10.0.0.4:80")},
		current: []lb.Status{
			st(ip("10.0.0.4:80"), lb.Unavailable),
			st(ip("10.0.0.1:80"), lb.Healthy),
			st(ip("10.0.0.2:80"), lb.Initial),
			st(ip("10.0.0.3:80"), lb.Unhealthy),
		},
		want: "keep 10.0.0.1:80 healthy\nkeep 10.0.0.2:80 initial\nkeep 10.0.0.3:80 unhealthy\nkeep 10.0.0.4:80 unavailable\n",
	}, {
		name:    "rolling update",
		desired: []lb.Target{ip("10.0.0.1:80"), ip("10.0.0.3:80")},
		current: []lb.Status{
			st(ip("10.0.0.1:80"), lb.Healthy),
			st(ip("10.0.0.2:80"), lb.Healthy),
			st(ip("10.0.0.9:80"), lb.Draining),
			st(ip("10.0.0.8:80"), lb.Unused),
		},
		want: "register 10.0.0.3:80\nderegister 10.0.0.2:80\nderegister 10.0.0.9:80\nkeep 10.0.0.1:80 healthy\n",
	}, {
		name:    "desired again while draining or unused",
		desired: []lb.Target{ip("10.0.0.1:80"), ip("10.0.0.2:80")},
		current: []lb.Status{st(ip("10.0.0.1:80"), lb.Draining), st(ip("10.0.0.2:80"), lb.Unused)},
		want:    "register 10.0.0.1:80\nregister 10.0.0.2:80\n",
	}, {
		name:    "same IP other port is another target",
		desired: []lb.Target{ip("10.0.0.1:8080")},
		current: []lb.Status{st(ip("10.0.0.1:80"), lb.Healthy)},
		want:    "register 10.0.0.1:8080\nderegister 10.0.0.1:80\n",
	}, {
		name:    "duplicates in desired",
		desired: []lb.Target{ip("10.0.0.1:80"), ip("10.0.0.1:80")},
		want:    "register 10.0.0.1:80\n",
	}, {
		name:    "instance targets match by ID when the provider lists IDs",
		desired: []lb.Target{inst("i-a", "10.0.1.1:30080"), inst("i-b", "10.0.1.2:30080")},
		current: []lb.Status{st(inst("i-a", ":30080"), lb.Healthy), st(inst("i-old", ":30080"), lb.Healthy)},
		want:    "register i-b:30080\nderegister i-old:30080\nkeep i-a:30080 healthy\n",
	}, {
		name:    "instance targets match by address when the provider has no IDs (HAProxy)",
		desired: []lb.Target{inst("i-a", "10.0.1.1:30080")},
		current: []lb.Status{st(ip("10.0.1.1:30080"), lb.Initial)},
		want:    "keep 10.0.1.1:30080 initial\n",
	}, {
		name:    "replaced instance reusing an IP is a new target",
		desired: []lb.Target{inst("i-new", "10.0.1.1:30080")},
		current: []lb.Status{st(inst("i-old", "10.0.1.1:30080"), lb.Healthy)},
		want:    "register i-new:30080\nderegister i-old:30080\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			plan := Diff(tc.desired, tc.current)
			if got := dumpPlan(plan); got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
			if plan.Empty() != (len(plan.Register)+len(plan.Deregister) == 0) {
				t.Error("Empty disagrees")
			}
			// Never deregister what is desired.
			for _, d := range tc.desired {
				for _, x := range plan.Deregister {
					if d.Same(x) {
						t.Errorf("desired %v deregistered", d)
					}
				}
			}
		})
	}
}

// Applying a plan to a model of the group and diffing again converges.
func TestDiffConverges(t *testing.T) {
	desired := []lb.Target{ip("10.0.0.1:80"), ip("10.0.0.2:80"), ip("10.0.0.3:80")}
	current := []lb.Status{st(ip("10.0.0.2:80"), lb.Draining), st(ip("10.0.0.4:80"), lb.Healthy)}
	for round := 0; round < 3; round++ {
		plan := Diff(desired, current)
		next := map[netip.AddrPort]lb.State{}
		for _, c := range current {
			next[c.Target.Address] = c.State
		}
		for _, r := range plan.Register {
			next[r.Address] = lb.Healthy
		}
		for _, d := range plan.Deregister {
			delete(next, d.Address)
		}
		current = current[:0]
		for a, s := range next {
			current = append(current, st(lb.Target{Address: a}, s))
		}
	}
	plan := Diff(desired, current)
	if !plan.Empty() || len(plan.Keep) != 3 {
		t.Fatalf("not converged: %s", dumpPlan(plan))
	}
	// Input order does not matter.
	slices.Reverse(current)
	if got := dumpPlan(Diff(desired, current)); got != dumpPlan(plan) {
		t.Fatalf("order-dependent plan:\n%s", got)
	}
}
