package haproxy

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"sluice.dev/sluice/internal/lb"
)

func TestParseInfo(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      process
		err       string
	}{
		{"2.6", "Name: HAProxy\nPid: 22734\nUptime: 0d 0h00m01s\nUptime_sec: 1\nStart_time_sec: 1795486139\n", process{22734, 1795486139}, ""},
		{"crlf and spaces", "Pid:  7 \r\nStart_time_sec: 9\r\n", process{7, 9}, ""},
		{"no pid", "Name: HAProxy\nStart_time_sec: 9\n", process{}, "no Pid"},
		{"bad pid", "Pid: -1\nStart_time_sec: 9\n", process{}, "Pid"},
		{"zero pid", "Pid: 0\nStart_time_sec: 9\n", process{}, "Pid"},
		{"bad start", "Pid: 1\nStart_time_sec: x\n", process{}, "Start_time_sec"},
		{"no start", "Pid: 1\n", process{}, "neither"},
		{"permission", "Permission denied\n", process{}, "Permission denied"},
		{"empty", "", process{}, "no Pid"},
	} {
		got, err := parseInfo(tc.out)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v", tc.name, got, err, tc.want)
		}
	}
	// Without Start_time_sec (HAProxy < 2.5) the start is derived from
	// the uptime and is stable across readings.
	a, err := parseInfo("Pid: 3\nUptime_sec: 100\n")
	if err != nil || a.pid != 3 || a.start <= 0 {
		t.Fatalf("derived start: %+v %v", a, err)
	}
}

func TestSplitInfo(t *testing.T) {
	info, rest, err := splitInfo("Pid: 1\r\nStart_time_sec: 2\r\n\r\n1\r\n# be_name\r\n")
	if err != nil || info != "Pid: 1\nStart_time_sec: 2" || rest != "1\n# be_name\n" {
		t.Fatalf("split: %q %q %v", info, rest, err)
	}
	if _, _, err := splitInfo("Pid: 1"); err == nil {
		t.Fatal("unterminated answer accepted")
	}
}

func FuzzParseInfo(f *testing.F) {
	f.Add("Name: HAProxy\nPid: 22734\nUptime_sec: 1\nStart_time_sec: 1795486139\n\n1\n# be_name srv_name\n")
	f.Add("Pid: 1\r\nUptime_sec: 99999999999999999999\n")
	f.Add("Unknown command.\n\n")
	f.Fuzz(func(t *testing.T, out string) {
		if info, _, err := splitInfo(out); err == nil {
			out = info
		}
		pr, err := parseInfo(out)
		if err == nil && pr.pid <= 0 {
			t.Fatalf("accepted pid %d", pr.pid)
		}
	})
}

// restartFake models a reload: a new process with no dynamic servers.
func restartFake(f *fakeAPI) {
	f.update(func() {
		f.pid++
		for _, b := range f.backends {
			b.servers = nil
		}
	})
}

func TestRestoreAfterReload(t *testing.T) {
	f := newFakeAPI(t)
	f.backends["be"] = &fakeBackend{dynamic: true}
	heard := -1
	p, err := New(Options{Address: f.path, OnRestore: func(pid, restored int, _ time.Duration) {
		if pid == 101 {
			heard = restored
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tg := []lb.Target{target("10.0.0.1:80"), target("10.0.0.2:80"), target("10.0.0.3:80"), target("10.0.0.4:80")}
	if err := p.Register(ctx, "be", tg); err != nil {
		t.Fatal(err)
	}
	f.update(func() {
		for _, s := range f.backends["be"].servers {
			s.status, s.check = "UP", "L7OK"
		}
		b := f.backends["be"].servers
		b[1].admin = admForcedDrain               // draining
		b[2].status, b[2].check = "DOWN", "L4CON" // unhealthy
		b[3].admin = admForcedMaint               // leaving
	})
	before, err := p.Targets(ctx, "be")
	if err != nil || len(before) != 4 {
		t.Fatalf("before: %+v %v", before, err)
	}
	restartFake(f)
	n := len(f.commands())
	after, err := p.Targets(ctx, "be")
	if err != nil {
		t.Fatal(err)
	}
	if p.Restarts() != 1 || heard != 3 {
		t.Fatalf("restarts %d, OnRestore heard %d restored (want 3)", p.Restarts(), heard)
	}
	var addrs []string
	for _, s := range after {
		addrs = append(addrs, s.Target.Address.String())
	}
	if !slices.Equal(addrs, []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"}) {
		t.Fatalf("restored %v (the server in maintenance stays gone)", addrs)
	}
	var got []string
	for _, c := range f.commands()[n:] {
		// Restore commands go to the new process, which the info names.
		if c, ok := strings.CutPrefix(c, "show info; "); ok && !strings.HasPrefix(c, "show ") {
			got = append(got, c)
		}
	}
	args := "check inter 1000ms fall 2 rise 1 weight 0"
	full := "check inter 1000ms fall 2 rise 1 weight 100"
	want := []string{
		"add server be/sluice-10-0-0-1-80 10.0.0.1:80 " + full,
		"enable health be/sluice-10-0-0-1-80; set server be/sluice-10-0-0-1-80 state ready",
		"add server be/sluice-10-0-0-2-80 10.0.0.2:80 " + full,
		"enable health be/sluice-10-0-0-2-80; set server be/sluice-10-0-0-2-80 state drain",
		"add server be/sluice-10-0-0-3-80 10.0.0.3:80 " + args,
		"enable health be/sluice-10-0-0-3-80",
		"set weight be/sluice-10-0-0-3-80 0; set server be/sluice-10-0-0-3-80 state ready; " +
			"set server be/sluice-10-0-0-3-80 health down; set weight be/sluice-10-0-0-3-80 100",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("restore commands:\n got %q\nwant %q", got, want)
	}
	// Same process again: nothing more is restored.
	if _, err := p.Targets(ctx, "be"); err != nil || p.Restarts() != 1 {
		t.Fatalf("second listing: %v, restarts %d", err, p.Restarts())
	}
}

// takeoverFake models "haproxy -x": a new process with no dynamic servers,
// while the old one, its servers intact, still answers every other
// connection on the runtime API socket for a while.
func takeoverFake(f *fakeAPI, turns int) {
	f.update(func() {
		old := map[string]*fakeBackend{}
		for name, b := range f.backends {
			c := *b
			c.servers = nil
			for _, s := range b.servers {
				s := *s
				c.servers = append(c.servers, &s)
			}
			old[name] = &c
		}
		f.old = &fakeProcess{pid: f.pid, backends: old}
		f.oldTurns = turns
		f.pid++
		for _, b := range f.backends {
			b.servers = nil
		}
	})
}

// TestRestoreDuringTakeover: while the old process still answers half the
// connections, the restore lands in the new process all the same, and no
// listing that predates the restore, nor one the old process answered, is
// taken for the new process's backend.
func TestRestoreDuringTakeover(t *testing.T) {
	for _, watch := range []bool{false, true} {
		f := newFakeAPI(t)
		f.backends["be"] = &fakeBackend{dynamic: true}
		p, err := New(Options{Address: f.path})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		tg := []lb.Target{target("10.0.0.1:80"), target("10.0.0.2:80")}
		if err := p.Register(ctx, "be", tg); err != nil {
			t.Fatal(err)
		}
		f.update(func() {
			for _, s := range f.backends["be"].servers {
				s.status, s.check = "UP", "L7OK"
			}
		})
		if st, err := p.Targets(ctx, "be"); err != nil || len(st) != 2 {
			t.Fatalf("before: %+v %v", st, err)
		}
		takeoverFake(f, 6)
		if watch {
			f.update(func() { f.oldTurns = 0 }) // the new process answers the read
			// A listing read before the watch's restore, judged after it.
			epoch := p.listing()
			pr, owned, err := p.read(ctx, "be")
			if err != nil {
				t.Fatal(err)
			}
			if err := p.poll(ctx); err != nil {
				t.Fatal(err)
			}
			if stale, err := p.seen(ctx, pr, epoch); err != nil || !stale || len(owned) != 0 {
				t.Fatalf("a listing of %d servers from before the restore: stale %v, %v", len(owned), stale, err)
			}
			f.update(func() { f.oldTurns = 6 })
		}
		for i := 0; i < 8; i++ { // each listing may reach either process
			st, err := p.Targets(ctx, "be")
			if err != nil || len(st) != 2 || st[0].State != lb.Healthy || st[1].State != lb.Healthy {
				t.Fatalf("watch %v, listing %d: %+v %v", watch, i, st, err)
			}
		}
		for _, name := range []string{"sluice-10-0-0-1-80", "sluice-10-0-0-2-80"} {
			if s := f.server("be", name); s == nil || s.admin != 0 {
				t.Fatalf("watch %v: %s in the new process: %+v", watch, name, s)
			}
		}
		if p.Restarts() != 1 {
			t.Fatalf("watch %v: restarts %d, want 1", watch, p.Restarts())
		}
	}
}

func TestWatchRestoresWithoutListing(t *testing.T) {
	f := newFakeAPI(t)
	f.backends["be"] = &fakeBackend{dynamic: true}
	p, err := New(Options{Address: f.path, WatchInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := p.Register(ctx, "be", []lb.Target{target("10.0.0.1:80")}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Targets(ctx, "be"); err != nil { // remembered
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { p.Watch(ctx, nil); close(done) }()
	restartFake(f)
	deadline := time.Now().Add(30 * time.Second)
	for f.server("be", "sluice-10-0-0-1-80") == nil {
		if time.Now().After(deadline) {
			t.Fatal("watch did not restore the server")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
}

func TestRestoreOff(t *testing.T) {
	f := newFakeAPI(t)
	f.backends["be"] = &fakeBackend{dynamic: true}
	p := newProvider(t, f) // WatchInterval -1
	ctx := context.Background()
	if err := p.Register(ctx, "be", []lb.Target{target("10.0.0.1:80")}); err != nil {
		t.Fatal(err)
	}
	restartFake(f)
	if st, err := p.Targets(ctx, "be"); err != nil || len(st) != 0 {
		t.Fatalf("restore off: %+v %v", st, err)
	}
	p.Watch(context.Background(), nil) // returns at once
}
