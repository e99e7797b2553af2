package haproxy

import (
	"context"
	"slices"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/lb"
)

// A target with a CheckPort is added with "port N" (health-checked there,
// e.g. sluice node-health), and restored with it after a reload.
func TestCheckPortAddedAndRestored(t *testing.T) {
	f := newFakeAPI(t)
	f.backends["be"] = &fakeBackend{dynamic: true}
	p, err := New(Options{Address: f.path})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tg := target("10.0.0.1:30080")
	tg.CheckPort = 10254
	if err := p.Register(ctx, "be", []lb.Target{tg, target("10.0.0.2:30080")}); err != nil {
		t.Fatal(err)
	}
	adds := func(cmds []string) []string {
		var out []string
		for _, c := range cmds {
			// Restore commands carry "show info" first (see restore.go).
			c = strings.TrimPrefix(c, "show info; ")
			if strings.HasPrefix(c, "add server ") {
				out = append(out, c)
			}
		}
		return out
	}
	want := []string{
		"add server be/sluice-10-0-0-1-30080 10.0.0.1:30080 check inter 1000ms fall 2 rise 1 weight 0 port 10254",
		"add server be/sluice-10-0-0-2-30080 10.0.0.2:30080 check inter 1000ms fall 2 rise 1 weight 0",
	}
	if got := adds(f.commands()); !slices.Equal(got, want) {
		t.Fatalf("adds:\n got %q\nwant %q", got, want)
	}
	if _, err := p.Targets(ctx, "be"); err != nil {
		t.Fatal(err)
	}
	restartFake(f)
	n := len(f.commands())
	if _, err := p.Targets(ctx, "be"); err != nil {
		t.Fatal(err)
	}
	got := adds(f.commands()[n:])
	if len(got) != 2 || !strings.HasSuffix(got[0], " port 10254") || strings.Contains(got[1], " port ") {
		t.Fatalf("restored with %q, want the check port kept", got)
	}
}
