// Package fake is an in-memory lb.Provider for controller unit tests: the
// test scripts target health (Step, SetHealth, SetConnections) and injects
// faults (Fail, SetUnreachable), then asserts on what the controller did
// (Calls, Targets). It models the lifecycle every real provider maps onto:
// registered targets start Initial, a health round makes them Healthy or
// Unhealthy, deregistered ones are Draining until they have no connections,
// then Unused (AWS-like, with KeepUnused) or gone (HAProxy-like).
package fake

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"sluice.dev/sluice/internal/lb"
)

// Options configures a Provider.
type Options struct {
	// Groups that exist and accept targets. Any other group is
	// lb.ErrGroupNotFound.
	Groups []string
	// StaticGroups exist but refuse Register with lb.ErrNotDynamic.
	StaticGroups []string
	// KeepUnused lists drained targets as lb.Unused (until registered
	// again) instead of dropping them. Default false: they vanish, as in
	// HAProxy.
	KeepUnused bool
}

// Op names a provider method for fault injection and call records.
type Op string

// Provider operations.
const (
	OpTargets    Op = "Targets"
	OpRegister   Op = "Register"
	OpDeregister Op = "Deregister"
)

// Call records one method call.
type Call struct {
	Op      Op
	Group   string
	Targets []lb.Target // nil for Targets
	Err     error       // what the call returned
}

type target struct {
	status lb.Status
	health lb.State // health a check round gives (Healthy unless scripted)
	reason string
}

type fault struct {
	err   error
	times int // remaining; <0 forever
}

// Provider is the in-memory lb.Provider. The zero value is not usable; use New.
type Provider struct {
	mu          sync.Mutex
	opts        Options
	groups      map[string]map[string]*target // group → key → target
	faults      map[Op][]fault
	unreachable bool
	calls       []Call
}

var _ lb.Provider = (*Provider)(nil)

// New returns a Provider with the groups of o, all empty.
func New(o Options) *Provider {
	p := &Provider{opts: o, groups: map[string]map[string]*target{}, faults: map[Op][]fault{}}
	for _, g := range o.Groups {
		p.groups[g] = map[string]*target{}
	}
	return p
}

func key(t lb.Target) string {
	if t.ID != "" {
		return "id:" + t.String()
	}
	return "addr:" + t.Address.String()
}

// begin records a call and returns the injected error, if any, and the group.
func (p *Provider) begin(op Op, group string) (map[string]*target, error) {
	if p.unreachable {
		return nil, fmt.Errorf("fake %s: %w", op, lb.ErrUnreachable)
	}
	if fs := p.faults[op]; len(fs) > 0 {
		f := &fs[0]
		err := f.err
		if f.times > 0 {
			f.times--
			if f.times == 0 {
				p.faults[op] = fs[1:]
			}
		}
		return nil, err
	}
	if slices.Contains(p.opts.StaticGroups, group) {
		if op == OpRegister {
			return nil, fmt.Errorf("fake register in %s: %w", group, lb.ErrNotDynamic)
		}
		return map[string]*target{}, nil
	}
	g, ok := p.groups[group]
	if !ok {
		return nil, fmt.Errorf("fake group %s: %w", group, lb.ErrGroupNotFound)
	}
	return g, nil
}

func (p *Provider) record(op Op, group string, ts []lb.Target, err error) error {
	p.calls = append(p.calls, Call{Op: op, Group: group, Targets: slices.Clone(ts), Err: err})
	return err
}

// Targets implements lb.Provider.
func (p *Provider) Targets(ctx context.Context, group string) ([]lb.Status, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, p.record(OpTargets, group, nil, err)
	}
	g, err := p.begin(OpTargets, group)
	if err != nil {
		return nil, p.record(OpTargets, group, nil, err)
	}
	out := make([]lb.Status, 0, len(g))
	for _, t := range g {
		out = append(out, t.status)
	}
	slices.SortFunc(out, func(a, b lb.Status) int { return a.Target.Compare(b.Target) })
	p.record(OpTargets, group, nil, nil)
	return out, nil
}

// Register implements lb.Provider: new targets, and Draining or Unused ones,
// become Initial; others are left as they are.
func (p *Provider) Register(ctx context.Context, group string, ts []lb.Target) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return p.record(OpRegister, group, ts, err)
	}
	g, err := p.begin(OpRegister, group)
	if err != nil {
		return p.record(OpRegister, group, ts, err)
	}
	for _, t := range ts {
		cur, ok := g[key(t)]
		switch {
		case !ok:
			g[key(t)] = &target{status: lb.Status{Target: t, State: lb.Initial}, health: lb.Healthy}
		case cur.status.State == lb.Draining || cur.status.State == lb.Unused:
			cur.status.State, cur.status.Reason = lb.Initial, ""
		}
	}
	return p.record(OpRegister, group, ts, nil)
}

// Deregister implements lb.Provider: targets become Draining; Step removes
// them once they have no connections.
func (p *Provider) Deregister(ctx context.Context, group string, ts []lb.Target) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return p.record(OpDeregister, group, ts, err)
	}
	g, err := p.begin(OpDeregister, group)
	if err != nil {
		return p.record(OpDeregister, group, ts, err)
	}
	for _, t := range ts {
		if cur, ok := g[key(t)]; ok && cur.status.State != lb.Unused {
			cur.status.State, cur.status.Reason = lb.Draining, "deregistered"
		}
	}
	return p.record(OpDeregister, group, ts, nil)
}

// Step runs one health-check round in every group: Initial, Healthy and
// Unhealthy targets take their scripted health (Healthy by default);
// Draining targets without connections become Unused or vanish.
func (p *Provider) Step() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, g := range p.groups {
		for k, t := range g {
			switch t.status.State {
			case lb.Initial, lb.Healthy, lb.Unhealthy, lb.Unavailable:
				t.status.State, t.status.Reason = t.health, t.reason
			case lb.Draining:
				if t.status.Connections > 0 {
					continue
				}
				if !p.opts.KeepUnused {
					delete(g, k)
					continue
				}
				t.status.State, t.status.Reason = lb.Unused, ""
			}
		}
	}
}

// SetHealth scripts the health that Step gives target t in group
// (lb.Healthy, lb.Unhealthy or lb.Unavailable) from now on. It reports
// whether the target exists.
func (p *Provider) SetHealth(group string, t lb.Target, s lb.State, reason string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur, ok := p.groups[group][key(t)]
	if ok {
		cur.health, cur.reason = s, reason
	}
	return ok
}

// SetConnections sets a target's connection count (-1: unknown). A Draining
// target is not removed by Step while it has connections.
func (p *Provider) SetConnections(group string, t lb.Target, n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur, ok := p.groups[group][key(t)]
	if ok {
		cur.status.Connections = n
	}
	return ok
}

// Fail makes the next times calls of op return err (times < 0: every call
// until Clear). Faults queue up in order.
func (p *Provider) Fail(op Op, err error, times int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if times == 0 {
		return
	}
	p.faults[op] = append(p.faults[op], fault{err: err, times: times})
}

// SetUnreachable makes every call fail with lb.ErrUnreachable while on.
func (p *Provider) SetUnreachable(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unreachable = on
}

// Clear removes all injected faults.
func (p *Provider) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = map[Op][]fault{}
	p.unreachable = false
}

// Reset forgets every target of group, like an HAProxy restart.
func (p *Provider) Reset(group string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.groups[group]; ok {
		p.groups[group] = map[string]*target{}
	}
}

// Calls returns the calls made so far, oldest first.
func (p *Provider) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}
