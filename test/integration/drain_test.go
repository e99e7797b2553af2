//go:build integration

package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"sluice.dev/sluice/test/load"
)

// fromPool is a load.Check accepting only responses an echo backend of
// service wrote (so a proxy's own 200 page or a wrong route fails). Echo
// names itself in X-Echo-Name except on /bytes/N, which is checked by its
// length instead.
func fromPool(service string) func(*http.Response) error {
	return func(r *http.Response) error {
		if n, ok := strings.CutPrefix(r.Request.URL.Path, "/bytes/"); ok {
			if got := fmt.Sprint(r.ContentLength); got != n {
				return fmt.Errorf("/bytes/%s answered with Content-Length %s", n, got)
			}
			return nil
		}
		if name := r.Header.Get("X-Echo-Name"); !strings.HasPrefix(name, service+"-") {
			return fmt.Errorf("response not from a %s backend (X-Echo-Name %q)", service, name)
		}
		return nil
	}
}

// fleet is the common set-up: a pool of echo backends of Service "app"
// (the first three started and in the EndpointSlice) behind Ingress host
// app.test, n proxies reading the manifests, HAProxy in front.
type fleet struct {
	e       *env
	app     *pool
	proxies []*sluiceProxy
	lb      *haproxy
}

func newFleet(t *testing.T, proxies, poolSize int, proxyFlags ...string) *fleet {
	t.Helper()
	return newFleetBackends(t, proxies, poolSize, nil, proxyFlags...)
}

// newFleetBackends is newFleet with extra flags for every echo backend.
func newFleetBackends(t *testing.T, proxies, poolSize int, echoFlags []string, proxyFlags ...string) *fleet {
	t.Helper()
	e := newEnv(t)
	f := &fleet{e: e, app: e.pool("app", max(3, poolSize))}
	f.app.flags = echoFlags
	for i := range 3 {
		f.app.start(i)
	}
	e.write("class.yaml", ingressClassYAML)
	e.write("app-service.yaml", serviceYAML("app"))
	e.write("app-ingress.yaml", ingressYAML("app", "app.test", rule{"/", "app"}))
	e.write("app-slice.yaml", f.app.slice([]int{0, 1, 2}))
	for i := range proxies {
		p := e.startProxy(fmt.Sprintf("sluice-%d", i), proxyFlags...)
		waitRoute(t, fmt.Sprintf("http://127.0.0.1:%d/", p.http), "app.test", "app-", 10*time.Second)
		f.proxies = append(f.proxies, p)
	}
	f.lb = e.startHAProxy(f.proxies...)
	return f
}

// metric returns metric name (summed over labels) for each proxy.
func (f *fleet) metric(t *testing.T, name string) []int {
	t.Helper()
	vals := make([]int, len(f.proxies))
	for i, p := range f.proxies {
		v, err := p.metric(name)
		if err != nil {
			t.Fatal(err)
		}
		vals[i] = int(v)
	}
	return vals
}

// waitRoute polls url with Host host until an echo backend whose name starts
// with prefix answers, i.e. the proxy has loaded the route.
func waitRoute(t *testing.T, url, host, prefix string, timeout time.Duration) {
	t.Helper()
	if err := pollRoute(url, host, prefix, timeout); err != nil {
		t.Fatal(err)
	}
}

func pollRoute(url, host, prefix string, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Host = host
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			name := resp.Header.Get("X-Echo-Name")
			if resp.StatusCode == 200 && strings.HasPrefix(name, prefix) {
				return nil
			}
			last = fmt.Sprintf("%s from %q", resp.Status, name)
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("waiting for %s (Host %s) to be served by %s*: last %s", url, host, prefix, last)
}

// drainLoad is the load both drain tests send: 500 requests/s for 10 s,
// half on keep-alive connections, small and 64 KiB responses mixed so
// some requests are mid-body when a proxy stops.
func drainLoad(f *fleet) load.Options {
	return load.Options{
		Target:            f.lb.url(),
		Host:              "app.test",
		Paths:             []string{"/", "/bytes/65536", "/a/b?x=1", "/bytes/1024"},
		Rate:              500,
		Duration:          10 * time.Second,
		KeepAliveFraction: 0.5,
		Check:             fromPool("app"),
	}
}

// stopOutcome is what happened to the proxy stopped mid-run.
type stopOutcome struct {
	exitCode   int           // -1: killed by a signal or did not exit
	drain      time.Duration // signal → exit
	downAfter  time.Duration // signal → HAProxy reports it DOWN; -1 if never
	downBefore bool          // HAProxy reported it DOWN before it exited
}

// runWithStop sends drainLoad through f, sends sig to one proxy 3 s in, and
// returns the load result and what the stopped proxy did.
func runWithStop(t *testing.T, f *fleet, sig syscall.Signal) (load.Result, stopOutcome) {
	t.Helper()
	type runResult struct {
		res load.Result
		err error
	}
	done := make(chan runResult, 1)
	go func() {
		res, err := load.Run(context.Background(), drainLoad(f))
		done <- runResult{res, err}
	}()

	time.Sleep(3 * time.Second)
	victim := f.proxies[1]
	stop := make(chan struct{})
	downC := f.lb.watchDown(victim.name, stop)
	t0 := time.Now()
	victim.proc.Signal(t, sig)
	out := stopOutcome{exitCode: victim.proc.Wait(30 * time.Second), downAfter: -1}
	if victim.proc.Exited() {
		out.drain = victim.proc.EndedAt().Sub(t0)
	}
	select {
	case at, ok := <-downC:
		if ok {
			out.downAfter = at.Sub(t0)
			out.downBefore = victim.proc.Exited() && at.Before(victim.proc.EndedAt())
		}
	case <-time.After(5 * time.Second):
	}
	close(stop)

	r := <-done
	if r.err != nil {
		t.Fatalf("load: %v", r.err)
	}
	st, err := f.lb.statuses()
	if err != nil {
		t.Fatalf("reading haproxy status: %v", err)
	}
	for _, p := range f.proxies {
		if p != victim && st[p.name] != "UP" {
			t.Errorf("haproxy server %s is %q, want UP (only %s was stopped)", p.name, st[p.name], victim.name)
		}
	}
	if !strings.HasPrefix(st[victim.name], "DOWN") {
		t.Errorf("haproxy server %s is %q after it stopped, want DOWN", victim.name, st[victim.name])
	}
	return r.res, out
}

// TestDrainUnderLoad stops one of three proxies with SIGTERM under load: it
// must fail its health check, let HAProxy take it out, finish what it has
// and exit 0, without one failed request.
func TestDrainUnderLoad(t *testing.T) {
	f := newFleet(t, 3, 3)
	res, out := runWithStop(t, f, syscall.SIGTERM)
	report(t, "drain: requests=%d failed=%d max_drain=%.2fs down_after=%.2fs exit=%d | %s",
		res.Sent, res.Failed, out.drain.Seconds(), out.downAfter.Seconds(), out.exitCode, res)
	if out.exitCode != 0 {
		t.Errorf("drained proxy exit code %d, want 0", out.exitCode)
	}
	if !out.downBefore {
		t.Errorf("haproxy did not report the draining proxy DOWN before it exited (down_after=%v, drain=%v)", out.downAfter, out.drain)
	}
	if res.Failed != 0 {
		t.Errorf("%d of %d requests failed while a proxy drained: %v; first errors:\n%s",
			res.Failed, res.Sent, res.ByKind, strings.Join(res.Errors, "\n"))
	}
}

// TestDrainBrokenFails is the control for TestDrainUnderLoad: the same
// scenario, but the proxy dies at once (SIGKILL), as a proxy without
// graceful drain would. HAProxy needs two failed checks (≥ 200 ms) to notice,
// and with `retries 0` every request sent to the dead proxy in the meantime,
// and every request it had in flight, reaches the client as a failure. If
// this test ever sees 0 failures, the harness has gone blind and
// TestDrainUnderLoad's 0 proves nothing.
func TestDrainBrokenFails(t *testing.T) {
	f := newFleet(t, 3, 3)
	res, out := runWithStop(t, f, syscall.SIGKILL)
	report(t, "drain-broken: requests=%d failed=%d down_after=%.2fs | %s",
		res.Sent, res.Failed, out.downAfter.Seconds(), res)
	if res.Failed == 0 {
		t.Errorf("no request failed although a proxy was killed under load: the harness does not see failures")
	}
	if res.Succeeded == 0 {
		t.Errorf("no request succeeded: the scenario is broken, not the proxy")
	}
}

// TestRollingRestart restarts every proxy in turn under load, as a rolling
// update of the proxy Deployment would: SIGTERM, wait for a clean exit,
// start a new process on the same ports, wait until HAProxy has it UP, next.
// No request may fail.
func TestRollingRestart(t *testing.T) {
	f := newFleet(t, 3, 3)
	o := drainLoad(f)
	o.Duration = 20 * time.Second
	wait := startLoad(t, o)
	time.Sleep(time.Second)
	var drains []string
	for _, p := range f.proxies {
		p.proc.Signal(t, syscall.SIGTERM)
		t0 := time.Now()
		if code := p.proc.Wait(20 * time.Second); code != 0 {
			t.Fatalf("%s exited with %d after SIGTERM, want 0", p.name, code)
		}
		drains = append(drains, fmt.Sprintf("%.2fs", time.Since(t0).Seconds()))
		f.e.restartProxy(p)
		f.lb.waitStatus(t, p.name, "UP", 10*time.Second)
	}
	res := wait()
	report(t, "rolling-restart: proxies=%d drains=%v requests=%d failed=%d | %s", len(f.proxies), drains, res.Sent, res.Failed, res)
	if res.Failed != 0 {
		t.Errorf("%d of %d requests failed during a rolling restart: %v; first errors:\n%s",
			res.Failed, res.Sent, res.ByKind, strings.Join(res.Errors, "\n"))
	}
}

// TestDrainQuietPeriodWithTrafficPortChecks drains a proxy whose load
// balancer health-checks the traffic port (--health-on-traffic-port, as
// AWS target groups usually do). Once HAProxy has marked it DOWN only
// health checks arrive, so --drain-quiet-period should end draining, as it
// does when checks go to the admin port: a connection that carries only
// health checks is not new traffic.
func TestDrainQuietPeriodWithTrafficPortChecks(t *testing.T) {
	e := newEnv(t)
	app := e.pool("app", 3)
	for i := range 3 {
		app.start(i)
	}
	e.write("class.yaml", ingressClassYAML)
	e.write("app-service.yaml", serviceYAML("app"))
	e.write("app-ingress.yaml", ingressYAML("app", "app.test", rule{"/", "app"}))
	e.write("app-slice.yaml", app.slice([]int{0, 1, 2}))
	f := &fleet{e: e, app: app}
	for i := range 3 {
		p := e.startProxy(fmt.Sprintf("sluice-%d", i), "--health-on-traffic-port")
		p.checkTraffic = true
		f.proxies = append(f.proxies, p)
	}
	f.lb = e.startHAProxy(f.proxies...)
	res, out := runWithStop(t, f, syscall.SIGTERM)
	reason := stopReason(f.proxies[1].proc.LogPath)
	report(t, "drain-traffic-port-checks: requests=%d failed=%d drain=%.2fs down_after=%.2fs reason=%q",
		res.Sent, res.Failed, out.drain.Seconds(), out.downAfter.Seconds(), reason)
	if !strings.HasPrefix(reason, "no new connection") {
		t.Errorf("draining ended by %q, want the quiet period (HAProxy had marked the proxy DOWN after %v)", reason, out.downAfter)
	}
	if res.Failed != 0 {
		t.Errorf("%d requests failed: %v", res.Failed, res.ByKind)
	}
}

// stopReason returns the reason the proxy logged for entering the stopping
// state, "" if it did not.
func stopReason(logPath string) string {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return err.Error()
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "lifecycle transition") && strings.Contains(line, "state=stopping") {
			if _, r, ok := strings.Cut(line, `reason="`); ok {
				r, _, _ = strings.Cut(r, `"`)
				return r
			}
		}
	}
	return ""
}
