package fake

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"sluice.dev/sluice/internal/lb"
)

func tg(s string) lb.Target { return lb.Target{Address: netip.MustParseAddrPort(s)} }

func states(t *testing.T, p *Provider, group string) map[lb.Target]lb.State {
	t.Helper()
	st, err := p.Targets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	m := map[lb.Target]lb.State{}
	for _, s := range st {
		m[s.Target] = s.State
	}
	return m
}

func TestLifecycle(t *testing.T) {
	for _, keep := range []bool{false, true} {
		p := New(Options{Groups: []string{"g"}, KeepUnused: keep})
		ctx := context.Background()
		a, b := tg("10.0.0.1:80"), tg("10.0.0.2:80")
		if err := p.Register(ctx, "g", []lb.Target{a, b}); err != nil {
			t.Fatal(err)
		}
		if s := states(t, p, "g"); s[a] != lb.Initial || s[b] != lb.Initial {
			t.Fatalf("after register: %v", s)
		}
		p.SetHealth("g", b, lb.Unhealthy, "503")
		p.Step()
		if s := states(t, p, "g"); s[a] != lb.Healthy || s[b] != lb.Unhealthy {
			t.Fatalf("after step: %v", s)
		}
		p.SetConnections("g", a, 3)
		if err := p.Deregister(ctx, "g", []lb.Target{a}); err != nil {
			t.Fatal(err)
		}
		p.Step()
		if s := states(t, p, "g"); s[a] != lb.Draining {
			t.Fatalf("draining with connections: %v", s)
		}
		p.SetConnections("g", a, 0)
		p.Step()
		s := states(t, p, "g")
		if st, ok := s[a]; keep && st != lb.Unused || !keep && ok {
			t.Fatalf("keep=%v drained: %v", keep, s)
		}
		// Registered again after draining: Initial.
		if err := p.Register(ctx, "g", []lb.Target{a}); err != nil {
			t.Fatal(err)
		}
		if s := states(t, p, "g"); s[a] != lb.Initial {
			t.Fatalf("re-registered: %v", s)
		}
		p.Reset("g")
		if s := states(t, p, "g"); len(s) != 0 {
			t.Fatalf("after reset: %v", s)
		}
	}
}

func TestFaults(t *testing.T) {
	p := New(Options{Groups: []string{"g"}, StaticGroups: []string{"s"}})
	ctx := context.Background()
	ts := []lb.Target{tg("10.0.0.1:80")}
	if _, err := p.Targets(ctx, "nope"); !errors.Is(err, lb.ErrGroupNotFound) {
		t.Errorf("unknown group: %v", err)
	}
	if err := p.Register(ctx, "s", ts); !errors.Is(err, lb.ErrNotDynamic) {
		t.Errorf("static group: %v", err)
	}
	boom := errors.New("boom")
	p.Fail(OpRegister, boom, 2)
	for i := 0; i < 2; i++ {
		if err := p.Register(ctx, "g", ts); !errors.Is(err, boom) {
			t.Errorf("injected fault %d: %v", i, err)
		}
	}
	if err := p.Register(ctx, "g", ts); err != nil {
		t.Errorf("after faults: %v", err)
	}
	p.SetUnreachable(true)
	if _, err := p.Targets(ctx, "g"); !errors.Is(err, lb.ErrUnreachable) {
		t.Errorf("unreachable: %v", err)
	}
	p.Fail(OpDeregister, boom, -1)
	p.Clear()
	if err := p.Deregister(ctx, "g", ts); err != nil {
		t.Errorf("after clear: %v", err)
	}
	calls := p.Calls()
	if len(calls) != 7 || calls[2].Err == nil || calls[4].Err != nil || calls[4].Op != OpRegister {
		t.Fatalf("calls: %+v", calls)
	}
}
