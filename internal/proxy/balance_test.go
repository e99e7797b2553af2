package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"sluice.dev/sluice/internal/route"
)

// counts sends n GETs (with optional header pairs) and counts answers by body.
func counts(t *testing.T, c *http.Client, url string, n int, hdr ...string) map[string]int {
	t.Helper()
	m := make(map[string]int)
	for range n {
		r := get(t, c, url, hdr...)
		if r.status != 200 {
			t.Fatalf("status %d %q", r.status, r.body)
		}
		m[strings.TrimSpace(r.body)]++
	}
	return m
}

func threeBackends(t *testing.T) ([]*testBackend, []string) {
	bs := []*testBackend{newBackend(t, "a", nil), newBackend(t, "b", nil), newBackend(t, "c", nil)}
	return bs, []string{bs[0].addr(), bs[1].addr(), bs[2].addr()}
}

func TestRoundRobin(t *testing.T) {
	_, addrs := threeBackends(t)
	p, srv, c := front(t, Options{})
	p.Update(tableOf(backendOf("ns/s", route.Policy{Algorithm: route.RoundRobin, Retries: -1}, addrs...)))
	got := counts(t, c, srv.URL, 300)
	for _, n := range []string{"a", "b", "c"} {
		if got[n] != 100 {
			t.Errorf("round robin: %v, want 100 each", got)
			break
		}
	}
}

func TestLeastRequestSpreads(t *testing.T) {
	_, addrs := threeBackends(t)
	p, srv, c := front(t, Options{})
	p.Update(tableOf(backendOf("ns/s", defaults(), addrs...)))
	got := counts(t, c, srv.URL, 600)
	for _, n := range []string{"a", "b", "c"} {
		// Expected 200 each; the bounds are > 10 standard deviations away.
		if got[n] < 100 || got[n] > 300 {
			t.Errorf("least request with equal load: %v, want about 200 each", got)
			break
		}
	}
}

func TestLeastRequestAvoidsBusy(t *testing.T) {
	release := make(chan struct{})
	slow := newBackend(t, "slow", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
		w.Write([]byte("slow\n"))
	})
	fast := newBackend(t, "fast", nil)
	p, srv, c := front(t, Options{})
	// Hold two requests on slow (routed there by a single-endpoint table),
	// then make both endpoints eligible.
	p.Update(tableOf(backendOf("ns/s", defaults(), slow.addr())))
	done := make(chan result, 2)
	for range 2 {
		go func() {
			res, err := c.Get(srv.URL + "/hold")
			if err == nil {
				res.Body.Close()
				done <- result{status: res.StatusCode}
				return
			}
			done <- result{}
		}()
	}
	eventually(t, "two requests held", func() bool { return slow.hits.Load() == 2 })
	p.Update(tableOf(backendOf("ns/s", defaults(), slow.addr(), fast.addr())))
	// With two endpoints the two choices are always distinct, so the busy
	// one loses every comparison.
	got := counts(t, c, srv.URL, 50)
	close(release)
	if got["fast"] != 50 {
		t.Errorf("least request with a busy endpoint: %v, want all on fast", got)
	}
	for range 2 {
		if r := <-done; r.status != 200 {
			t.Errorf("held request: %+v", r)
		}
	}
}

func TestHeaderHash(t *testing.T) {
	_, addrs := threeBackends(t)
	p, srv, c := front(t, Options{})
	pol := route.Policy{Algorithm: route.HeaderHash, HashHeader: "x-user", Retries: -1}
	p.Update(tableOf(backendOf("ns/s", pol, addrs...)))

	where := make(map[string]string) // user → endpoint
	for i := range 200 {
		user := fmt.Sprintf("user-%d", i)
		got := counts(t, c, srv.URL, 3, "X-User", user)
		if len(got) != 1 {
			t.Fatalf("%s spread over %v, want one endpoint", user, got)
		}
		for n := range got {
			where[user] = n
		}
	}
	per := make(map[string]int)
	for _, n := range where {
		per[n]++
	}
	for _, n := range []string{"a", "b", "c"} {
		if per[n] < 30 { // expected about 67
			t.Errorf("200 users over 3 endpoints: %v, want each used", per)
			break
		}
	}

	// Removing c moves only c's users.
	p.Update(tableOf(backendOf("ns/s", pol, addrs[0], addrs[1])))
	moved := 0
	for user, was := range where {
		got := counts(t, c, srv.URL, 1, "X-User", user)
		for n := range got {
			if was != "c" && n != was {
				moved++
			}
		}
	}
	if moved != 0 {
		t.Errorf("%d users not on the removed endpoint moved", moved)
	}

	// Without the header: least request, spread.
	if got := counts(t, c, srv.URL, 100); len(got) != 2 {
		t.Errorf("no header: %v, want both endpoints used", got)
	}
}

func TestRingStable(t *testing.T) {
	// Rings depend only on addresses: replicas agree.
	a := buildRing([]string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"})
	b := buildRing([]string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"})
	if len(a) != 3*vnodes(3) || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("ring not deterministic")
	}
	if hashString("abc") == hashString("abd") {
		t.Fatal("hash degenerate")
	}
}

func affinityCookie(t *testing.T, r result, name string) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func TestCookieAffinity(t *testing.T) {
	bs, addrs := threeBackends(t)
	p, srv, c := front(t, Options{})
	pol := route.Policy{Affinity: &route.CookieAffinity{Name: "route", MaxAge: time.Hour}, Retries: -1}
	p.Update(tableOf(backendOf("ns/s", pol, addrs...)))

	first := get(t, c, srv.URL)
	ck := affinityCookie(t, first, "route")
	if ck == nil {
		t.Fatalf("no affinity cookie in %v", first.header)
	}
	if !ck.HttpOnly || ck.Path != "/" || ck.MaxAge != 3600 || len(ck.Value) != 16 {
		t.Errorf("cookie %+v: want HttpOnly, Path=/, Max-Age=3600, 16-char value", ck)
	}
	for _, a := range addrs {
		host, _, _ := strings.Cut(a, ":")
		if strings.Contains(ck.Value, host) || strings.Contains(ck.Value, strings.ReplaceAll(host, ".", "")) {
			t.Errorf("cookie value %q exposes the address", ck.Value)
		}
	}
	pinned := strings.TrimSpace(first.body)
	for range 30 {
		r := get(t, c, srv.URL, "Cookie", "other=1; route="+ck.Value)
		if got := strings.TrimSpace(r.body); got != pinned {
			t.Fatalf("with cookie: served by %s, want %s", got, pinned)
		}
		if affinityCookie(t, r, "route") != nil {
			t.Fatal("Set-Cookie repeated for a pinned request")
		}
	}

	// The pinned endpoint vanishes: re-pin elsewhere.
	var rest []string
	for i, b := range bs {
		if b.name != pinned {
			rest = append(rest, addrs[i])
		}
	}
	p.Update(tableOf(backendOf("ns/s", pol, rest...)))
	r := get(t, c, srv.URL, "Cookie", "route="+ck.Value)
	if got := strings.TrimSpace(r.body); got == pinned || r.status != 200 {
		t.Fatalf("after removal: %d from %s", r.status, got)
	}
	ck2 := affinityCookie(t, r, "route")
	if ck2 == nil || ck2.Value == ck.Value {
		t.Fatalf("after removal: cookie %v, want a new pin", ck2)
	}
	again := get(t, c, srv.URL, "Cookie", "route="+ck2.Value)
	if again.body != r.body {
		t.Errorf("new pin not sticky: %q then %q", r.body, again.body)
	}
	// A garbage cookie is ignored.
	if r := get(t, c, srv.URL, "Cookie", `route="nonsense"; route`); r.status != 200 || affinityCookie(t, r, "route") == nil {
		t.Errorf("garbage cookie: %d %v", r.status, r.header)
	}
}

func TestPickPasses(t *testing.T) {
	// Unit test of the pass logic: ejected and tried endpoints are avoided
	// until nothing else is left.
	mk := func(n int) *backendView {
		bv := &backendView{}
		for i := range n {
			bv.eps = append(bv.eps, endpoint{u: &upstream{addr: fmt.Sprint(i)}})
		}
		return bv
	}
	for _, alg := range []route.Algorithm{route.LeastRequest, route.RoundRobin, route.HeaderHash} {
		bv := mk(4)
		bv.policy.Algorithm = alg
		bv.ring = buildRing([]string{"0", "1", "2", "3"})
		now := int64(1000)
		bv.eps[0].u.ejectedUntil.Store(2000)
		bv.eps[1].u.ejectedUntil.Store(2000)
		var tr tried
		tr.add(2)
		for k := range 50 {
			if i := bv.pick(uint64(k)*0x9e3779b97f4a7c15, true, now, &tr); i != 3 {
				t.Fatalf("%v: picked %d, want 3 (only healthy untried)", alg, i)
			}
		}
		tr.add(3)
		for k := range 50 {
			if i := bv.pick(uint64(k)*0x9e3779b97f4a7c15, true, now, &tr); i != 0 && i != 1 {
				t.Fatalf("%v: picked %d, want an ejected untried one", alg, i)
			}
		}
		tr.add(0)
		tr.add(1)
		if i := bv.pick(7, true, now, &tr); i < 0 || i > 3 {
			t.Fatalf("%v: picked %d with everything tried", alg, i)
		}
		// Ejection expires.
		var none tried
		seen := make(map[int]bool)
		for k := range 200 {
			seen[bv.pick(uint64(k)*0x9e3779b97f4a7c15, true, 3000, &none)] = true
		}
		if !seen[0] || !seen[1] {
			t.Errorf("%v: expired ejection still avoided: %v", alg, seen)
		}
	}
}
