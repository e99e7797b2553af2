package awsfake

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Target health states and reasons, as ELBv2 spells them.
const (
	stateInitial   = "initial"
	stateHealthy   = "healthy"
	stateUnhealthy = "unhealthy"
	stateUnused    = "unused"
	stateDraining  = "draining"

	reasonRegistering   = "Elb.RegistrationInProgress"
	reasonInitialChecks = "Elb.InitialHealthChecking"
	reasonDeregistering = "Target.DeregistrationInProgress"
	reasonNotRegistered = "Target.NotRegistered"
	reasonFailedChecks  = "Target.FailedHealthChecks"
	reasonCodeMismatch  = "Target.ResponseCodeMismatch"
	reasonTimeout       = "Target.Timeout"
)

type key struct {
	id   string
	port int
}

// group is one target group: its settings, targets and traffic listener.
// Fields are guarded by Fake.mu.
type group struct {
	f       *Fake
	arn     string
	cfg     TargetGroup
	targets map[key]*target
	ln      net.Listener
	httpSrv *http.Server
	zoneLns map[string]net.Listener // CrossZoneOff: each zone's node
	attrs   map[string]string       // attributes set by ModifyTargetGroupAttributes
	rr      int
}

// target is one registration. A target keeps its context (and with it its
// forwarded connections) across a re-registration during draining; the
// context ends when the target is removed.
type target struct {
	id           string
	port         int
	zone         string
	addr         netip.AddrPort // where traffic and health checks go
	state        string
	reason, desc string
	gen          int // bumped by register and deregister; stale loops stop
	okRun        int
	failRun      int
	deregAt      time.Time
	ctx          context.Context
	cancel       context.CancelFunc
	conns        map[any]struct{}
}

func (t *target) remove() { t.cancel() }

func (g *group) sorted() []*target {
	out := make([]*target, 0, len(g.targets))
	for _, t := range g.targets {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *target) int {
		if c := strings.Compare(a.id, b.id); c != 0 {
			return c
		}
		return a.port - b.port
	})
	return out
}

// register adds or revives a target. Caller holds f.mu and has validated
// the target.
func (g *group) register(k key, zone string, addr netip.AddrPort) {
	f := g.f
	t, ok := g.targets[k]
	if ok && t.state != stateDraining {
		return // idempotent: health is not reset
	}
	if !ok {
		ctx, cancel := context.WithCancel(f.ctx)
		t = &target{id: k.id, port: k.port, ctx: ctx, cancel: cancel, conns: map[any]struct{}{}}
		g.targets[k] = t
	}
	t.zone, t.addr = zone, addr
	t.gen++
	t.state, t.reason, t.desc = stateInitial, reasonRegistering, "Target registration is in progress"
	t.okRun, t.failRun = 0, 0
	gen := t.gen
	f.wg.Go(func() { f.checkLoop(g, t, gen) })
}

// deregister starts a target's drain. Caller holds f.mu.
func (g *group) deregister(k key) {
	f := g.f
	t, ok := g.targets[k]
	if !ok || t.state == stateDraining {
		return
	}
	t.gen++
	t.state, t.reason, t.desc = stateDraining, reasonDeregistering, "Target deregistration is in progress"
	t.deregAt = time.Now()
	gen := t.gen
	delay := f.scale(g.cfg.DeregistrationDelay)
	f.wg.Go(func() {
		if !f.sleep(delay) {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if t.gen == gen && g.targets[k] == t {
			delete(g.targets, k)
			t.remove() // resets what is still connected
		}
	})
}

// sleep waits d or until the fake closes; false means closed.
func (f *Fake) sleep(d time.Duration) bool {
	if d <= 0 {
		return f.ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-f.ctx.Done():
		return false
	}
}

// checkLoop runs one registration's health checks until the target is
// deregistered or registered again.
func (f *Fake) checkLoop(g *group, t *target, gen int) {
	f.mu.Lock()
	interval := f.scale(g.cfg.HealthCheckInterval)
	reg := interval * time.Duration(g.cfg.RegistrationIntervals)
	f.mu.Unlock()
	if !f.sleep(reg) {
		return
	}
	for {
		f.mu.Lock()
		if t.gen != gen {
			f.mu.Unlock()
			return
		}
		if t.state == stateInitial {
			t.reason, t.desc = reasonInitialChecks, "Initial health checks in progress"
		}
		url, timeout := g.checkURL(t), max(f.scale(g.cfg.HealthCheckTimeout), time.Second)
		match := g.matcher()
		interval = f.scale(g.cfg.HealthCheckInterval)
		f.mu.Unlock()

		ok, reason, desc := f.probe(t.ctx, url, timeout, match)

		f.mu.Lock()
		if t.gen != gen {
			f.mu.Unlock()
			return
		}
		g.observe(t, ok, reason, desc)
		f.mu.Unlock()
		if !f.sleep(interval) {
			return
		}
	}
}

func (g *group) checkURL(t *target) string {
	port := t.addr.Port()
	if p, err := strconv.Atoi(g.cfg.HealthCheckPort); err == nil {
		port = uint16(p)
	}
	return "http://" + netip.AddrPortFrom(t.addr.Addr(), port).String() + g.cfg.HealthCheckPath
}

// matcher is the group's success-code range: ALB "200", NLB "200-399".
func (g *group) matcher() [2]int {
	if g.isHTTP() {
		return [2]int{200, 200}
	}
	return [2]int{200, 399}
}

func (g *group) isHTTP() bool { return g.cfg.Protocol == "HTTP" || g.cfg.Protocol == "HTTPS" }

// observe applies one check result. Caller holds f.mu.
func (g *group) observe(t *target, ok bool, reason, desc string) {
	if ok {
		t.okRun, t.failRun = t.okRun+1, 0
	} else {
		t.okRun, t.failRun = 0, t.failRun+1
	}
	switch {
	case ok && t.okRun >= g.cfg.HealthyThreshold:
		t.state, t.reason, t.desc = stateHealthy, "", ""
	case !ok && t.failRun >= g.cfg.UnhealthyThreshold:
		t.state, t.reason, t.desc = stateUnhealthy, reason, desc
	case !ok && t.state == stateUnhealthy:
		t.reason, t.desc = reason, desc
	}
}

// probe runs one HTTP health check.
func (f *Fake) probe(ctx context.Context, url string, timeout time.Duration, match [2]int) (bool, string, string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, reasonFailedChecks, "Health checks failed"
	}
	req.Header.Set("User-Agent", "ELB-HealthChecker/2.0")
	client := &http.Client{
		Transport: &http.Transport{DialContext: f.dial, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return false, reasonTimeout, "Request timed out"
		}
		return false, reasonFailedChecks, "Health checks failed"
	}
	resp.Body.Close()
	if resp.StatusCode < match[0] || resp.StatusCode > match[1] {
		return false, reasonCodeMismatch, fmt.Sprintf("Health checks failed with these codes: [%d]", resp.StatusCode)
	}
	return true, "", ""
}
