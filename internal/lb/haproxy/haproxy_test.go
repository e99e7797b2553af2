package haproxy

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"sluice.dev/sluice/internal/lb"
)

func target(s string) lb.Target { return lb.Target{Address: netip.MustParseAddrPort(s)} }

func newProvider(t *testing.T, f *fakeAPI) *Provider {
	t.Helper()
	p, err := New(Options{Address: f.path, WatchInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRegisterCommandSequence(t *testing.T) {
	f := newFakeAPI(t)
	f.backends["be"] = &fakeBackend{dynamic: true}
	p := newProvider(t, f)
	ctx := context.Background()

	if err := p.Register(ctx, "be", []lb.Target{target("10.0.0.1:80"), target("10.0.0.1:80")}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"show servers state be",
		"add server be/sluice-10-0-0-1-80 10.0.0.1:80 check inter 1000ms fall 2 rise 1 weight 0",
		"enable health be/sluice-10-0-0-1-80",
		"set weight be/sluice-10-0-0-1-80 0; set server be/sluice-10-0-0-1-80 state ready; " +
			"set server be/sluice-10-0-0-1-80 health down; set weight be/sluice-10-0-0-1-80 100",
	}
	if got := f.commands(); !slices.Equal(got, want) {
		t.Fatalf("commands:\n got %q\nwant %q", got, want)
	}

	st, err := p.Targets(ctx, "be")
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].State != lb.Initial || st[0].Target != target("10.0.0.1:80") || st[0].Connections != 0 {
		t.Fatalf("after register: %+v", st)
	}

	// Idempotent: a registered server is left alone (health not reset).
	n := len(f.commands())
	if err := p.Register(ctx, "be", []lb.Target{target("10.0.0.1:80")}); err != nil {
		t.Fatal(err)
	}
	if got := f.commands()[n:]; len(got) != 2 || got[0] != "show servers state be" || got[1] != "show stat be 4 -1" {
		t.Fatalf("re-register sent %q", got)
	}
}

func TestDeregisterSteps(t *testing.T) {
	f := newFakeAPI(t)
	f.backends["be"] = &fakeBackend{dynamic: true}
	p := newProvider(t, f)
	ctx := context.Background()
	tg := []lb.Target{target("10.0.0.1:80")}
	const name = "sluice-10-0-0-1-80"
	if err := p.Register(ctx, "be", tg); err != nil {
		t.Fatal(err)
	}
	srv := f.server("be", name)
	f.update(func() { srv.status, srv.check, srv.scur = "UP", "L7OK", 2 })

	state := func() lb.Status {
		t.Helper()
		st, err := p.Targets(ctx, "be")
		if err != nil {
			t.Fatal(err)
		}
		if len(st) != 1 {
			t.Fatalf("targets: %+v", st)
		}
		return st[0]
	}
	if s := state(); s.State != lb.Healthy {
		t.Fatalf("state %+v", s)
	}
	// Step 1: drain.
	if err := p.Deregister(ctx, "be", tg); err != nil {
		t.Fatal(err)
	}
	if s := state(); s.State != lb.Draining || s.Reason != "drain" || s.Connections != 2 {
		t.Fatalf("after first deregister: %+v", s)
	}
	// Sessions remain: stays in drain.
	if err := p.Deregister(ctx, "be", tg); err != nil {
		t.Fatal(err)
	}
	if s := state(); s.Reason != "drain" {
		t.Fatalf("draining server with sessions moved on: %+v", s)
	}
	// Sessions gone: maint, and kept there until it settled (maintSettle:
	// HAProxy 2.6.12 can crash on a "del server" right after a stream
	// let go of it).
	f.update(func() { srv.scur = 0 })
	for range 2 {
		if err := p.Deregister(ctx, "be", tg); err != nil {
			t.Fatal(err)
		}
		if s := f.server("be", name); s == nil || s.admin != admForcedMaint {
			t.Fatalf("right after drain: %+v, want kept in maint", s)
		}
	}
	f.update(func() { srv.since = maintSettle - 1 })
	if err := p.Deregister(ctx, "be", tg); err != nil {
		t.Fatal(err)
	}
	if f.server("be", name) == nil {
		t.Fatal("deleted before it settled in maintenance")
	}
	f.update(func() { srv.since = maintSettle })
	if err := p.Deregister(ctx, "be", tg); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Targets(ctx, "be"); err != nil || len(st) != 0 {
		t.Fatalf("after settling: %+v, %v", st, err)
	}
	// Idempotent once gone.
	if err := p.Deregister(ctx, "be", tg); err != nil {
		t.Fatal(err)
	}
}

func TestDeregisterMaintWithConnections(t *testing.T) {
	f := newFakeAPI(t)
	f.backends["be"] = &fakeBackend{dynamic: true, servers: []*fakeServer{
		{name: "sluice-10-0-0-1-80", addr: netip.MustParseAddrPort("10.0.0.1:80"), admin: admForcedMaint, scur: 1},
	}}
	p := newProvider(t, f)
	tg := []lb.Target{target("10.0.0.1:80")}
	if err := p.Deregister(context.Background(), "be", tg); err != nil {
		t.Fatalf("busy server must not be an error: %v", err)
	}
	if f.server("be", "sluice-10-0-0-1-80") == nil {
		t.Fatal("server with connections was deleted")
	}
	// Desired again while in maint: back to ready, forced down until checked.
	if err := p.Register(context.Background(), "be", tg); err != nil {
		t.Fatal(err)
	}
	if s := f.server("be", "sluice-10-0-0-1-80"); s.admin != 0 || s.status != "DOWN" {
		t.Fatalf("re-registered server: %+v", s)
	}
}

func TestDeregisterMaxDrain(t *testing.T) {
	f := newFakeAPI(t)
	f.backends["be"] = &fakeBackend{dynamic: true, servers: []*fakeServer{
		{name: "sluice-10-0-0-1-80", addr: netip.MustParseAddrPort("10.0.0.1:80"), admin: admForcedDrain, scur: 1, since: 59},
	}}
	p, err := New(Options{Address: f.path, MaxDrain: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	tg := []lb.Target{target("10.0.0.1:80")}
	if err := p.Deregister(context.Background(), "be", tg); err != nil {
		t.Fatal(err)
	}
	srv := f.server("be", "sluice-10-0-0-1-80")
	if srv.admin != admForcedDrain {
		t.Fatalf("left drain before MaxDrain: %+v", srv)
	}
	f.update(func() { srv.since = 60 })
	if err := p.Deregister(context.Background(), "be", tg); err != nil {
		t.Fatal(err)
	}
	// In maintenance now, kept while its session lasts.
	if srv := f.server("be", "sluice-10-0-0-1-80"); srv == nil || srv.admin != admForcedMaint {
		t.Fatalf("after MaxDrain: %+v", srv)
	}
}

func TestOwnership(t *testing.T) {
	f := newFakeAPI(t)
	f.backends["be"] = &fakeBackend{dynamic: true, servers: []*fakeServer{
		{name: "other", addr: netip.MustParseAddrPort("10.0.0.1:80"), status: "UP", check: "L7OK"},
		// Prefix, but the name is not the name of its address.
		{name: "sluice-10-0-0-9-80", addr: netip.MustParseAddrPort("10.0.0.2:80"), status: "UP", check: "L7OK"},
		{name: "sluice-10-0-0-3-80", addr: netip.MustParseAddrPort("10.0.0.3:80"), status: "DOWN", check: "L7STS", code: "503"},
	}}
	p := newProvider(t, f)
	ctx := context.Background()
	st, err := p.Targets(ctx, "be")
	if err != nil {
		t.Fatal(err)
	}
	want := []lb.Status{{Target: target("10.0.0.3:80"), State: lb.Unhealthy, Reason: "L7STS 503", Connections: 0}}
	if !slices.Equal(st, want) {
		t.Fatalf("targets:\n got %+v\nwant %+v", st, want)
	}
	if err := p.Deregister(ctx, "be", []lb.Target{target("10.0.0.1:80"), target("10.0.0.2:80")}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"other", "sluice-10-0-0-9-80"} {
		if s := f.server("be", n); s == nil || s.admin != 0 {
			t.Fatalf("foreign server %s touched: %+v", n, s)
		}
	}
}

func TestErrors(t *testing.T) {
	f := newFakeAPI(t)
	f.backends["be"] = &fakeBackend{dynamic: true}
	f.backends["static"] = &fakeBackend{dynamic: false}
	p := newProvider(t, f)
	ctx := context.Background()
	tg := []lb.Target{target("10.0.0.1:80"), target("10.0.0.2:80")}

	if _, err := p.Targets(ctx, "nope"); !errors.Is(err, lb.ErrGroupNotFound) {
		t.Errorf("targets of unknown backend: %v", err)
	}
	if err := p.Register(ctx, "nope", tg); !errors.Is(err, lb.ErrGroupNotFound) {
		t.Errorf("register in unknown backend: %v", err)
	}
	n := len(f.commands())
	if err := p.Register(ctx, "static", tg); !errors.Is(err, lb.ErrNotDynamic) {
		t.Errorf("register in static backend: %v", err)
	}
	if got := len(f.commands()) - n; got != 2 {
		t.Errorf("static backend: %d commands, want 2 (list, one add, then stop)", got)
	}

	unreachable, err := New(Options{Address: filepath.Join(t.TempDir(), "missing.sock")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unreachable.Targets(ctx, "be"); !errors.Is(err, lb.ErrUnreachable) {
		t.Errorf("missing socket: %v", err)
	}
}

func TestInvalidInputSendsNothing(t *testing.T) {
	f := newFakeAPI(t)
	f.backends["be"] = &fakeBackend{dynamic: true}
	p := newProvider(t, f)
	ctx := context.Background()
	for _, group := range []string{"", "be\nshutdown", "be;del server be/x", "be x", "be/x", `be\`} {
		if _, err := p.Targets(ctx, group); !errors.Is(err, lb.ErrInvalid) {
			t.Errorf("Targets(%q): %v", group, err)
		}
		if err := p.Register(ctx, group, []lb.Target{target("10.0.0.1:80")}); !errors.Is(err, lb.ErrInvalid) {
			t.Errorf("Register(%q): %v", group, err)
		}
	}
	bad := []lb.Target{
		{},
		target("0.0.0.0:80"),
		target("10.0.0.1:0"),
		target("[fe80::1%eth0]:80"),
		target("[ff02::1]:80"),
	}
	for _, b := range bad {
		if err := p.Register(ctx, "be", []lb.Target{b}); !errors.Is(err, lb.ErrInvalid) {
			t.Errorf("Register(%v): %v", b.Address, err)
		}
	}
	if got := f.commands(); len(got) != 0 {
		t.Fatalf("invalid input reached HAProxy: %q", got)
	}
	// A valid target next to an invalid one is still registered.
	err := p.Register(ctx, "be", []lb.Target{{}, target("[::ffff:10.0.0.1]:80")})
	if !errors.Is(err, lb.ErrInvalid) {
		t.Fatalf("mixed register: %v", err)
	}
	if f.server("be", "sluice-10-0-0-1-80") == nil {
		t.Fatal("valid (unmapped) target not registered")
	}
}

func TestNewOptions(t *testing.T) {
	for _, o := range []Options{
		{},
		{Address: "/s", Prefix: "a:b"},
		{Address: "/s", Prefix: "a;b"},
		{Address: "/s", ServerArgs: []string{"ssl verify"}},
		{Address: "/s", ServerArgs: []string{"x;shutdown"}},
		{Address: "/s", Weight: 1000},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
	p, err := New(Options{Address: "127.0.0.1:9999", ServerArgs: []string{"check-ssl", "ssl", "verify", "none"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.c.network != "tcp" || p.addArgs != "check inter 1000ms fall 2 rise 1 weight 0 check-ssl ssl verify none" || p.weight != "100" {
		t.Fatalf("%+v %q", p.c, p.addArgs)
	}
	if p, _ := New(Options{Address: "unix:rel.sock"}); p.c.network != "unix" || p.c.address != "rel.sock" {
		t.Fatalf("unix: prefix: %+v", p.c)
	}
}

func TestServerName(t *testing.T) {
	for addr, want := range map[string]string{
		"10.244.1.5:8080": "sluice-10-244-1-5-8080",
		"[fd00::1]:80":    "sluice-fd00-0000-0000-0000-0000-0000-0000-0001-80",
	} {
		if got := serverName("sluice-", netip.MustParseAddrPort(addr)); got != want {
			t.Errorf("serverName(%s) = %s, want %s", addr, got, want)
		}
	}
}
