package haproxy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"sluice.dev/sluice/internal/lb"
)

// A reload or restart of HAProxy forgets every dynamic server. Without help
// the backend stays empty (every request a 503) until the controller's next
// reconcile re-adds the servers, and even then they wait for a fresh rise.
// So the provider remembers the servers it last listed in each backend, and
// the process that listed them ("show info" Pid and Start_time_sec). When a
// different process answers, the servers it lacks are added back at once in
// their last known state: a server that was healthy is set ready at full
// weight (HAProxy counts a server leaving maintenance as up, and its checks
// confirm or take it down), a draining one is set to drain, anything else
// is activated forced down as on Register.
//
// Detection runs on every listing (the info and the servers state travel on
// one command line, so one process answers both) and, when Watch runs, every
// WatchInterval.

// process identifies one HAProxy process.
type process struct {
	pid   int
	start int64 // Start_time_sec; falls back to now-Uptime_sec when absent
}

// parseInfo reads Pid and the start time from "show info" output
// ("Name: value" lines). Both Pid and a start time are required.
func parseInfo(out string) (process, error) {
	var pr process
	var uptime int64 = -1
	fields := 0
	for _, l := range splitLines(out) {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		fields++
		v = strings.TrimSpace(v)
		switch k {
		case "Pid":
			n, err := strconv.ParseUint(v, 10, 31)
			if err != nil || n == 0 {
				return process{}, fmt.Errorf("parsing info: Pid %q", truncate(v, 20))
			}
			pr.pid = int(n)
		case "Start_time_sec":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return process{}, fmt.Errorf("parsing info: Start_time_sec %q", truncate(v, 20))
			}
			pr.start = n
		case "Uptime_sec":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return process{}, fmt.Errorf("parsing info: Uptime_sec %q", truncate(v, 20))
			}
			uptime = n
		}
	}
	if pr.pid == 0 {
		if err := classify(out); fields == 0 && err != nil {
			return process{}, err
		}
		return process{}, errors.New("parsing info: no Pid")
	}
	if pr.start == 0 {
		if uptime < 0 {
			return process{}, errors.New("parsing info: neither Start_time_sec nor Uptime_sec")
		}
		// HAProxy before 2.5 has no Start_time_sec: derive it, rounding
		// to 4 s so that two readings a second apart agree.
		pr.start = (time.Now().Unix() - uptime) / 4 * 4
	}
	return pr, nil
}

// splitInfo splits the answer to "show info; show X" into the info part and
// the rest: HAProxy ends each command's answer with an empty line.
func splitInfo(out string) (info, rest string, err error) {
	out = strings.ReplaceAll(out, "\r\n", "\n")
	info, rest, ok := strings.Cut(out, "\n\n")
	if !ok {
		if err := classify(out); err != nil {
			return "", "", err
		}
		return "", "", errors.New("parsing info: answer not terminated")
	}
	return info, rest, nil
}

// seen records which process answered a listing of backend, and remembers
// the listing. When the process differs from the one seen last, the
// servers remembered for every backend are restored first, and true is
// returned: the caller's listing is stale and must be read again.
func (p *Provider) seen(ctx context.Context, pr process) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := p.proc
	if prev == (process{}) || prev == pr {
		p.proc = pr
		return false, nil
	}
	p.restarts++
	if err := p.restoreLocked(ctx); err != nil {
		// p.proc stays the old process, so the next listing or watch tick
		// tries the restore again instead of taking the new one as known.
		return true, err
	}
	p.proc = pr
	return true, nil
}

// remember keeps backend's servers as listed by process pr, unless another
// process has been seen since.
func (p *Provider) remember(pr process, backend string, servers []server) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != pr {
		return
	}
	if len(servers) == 0 {
		delete(p.known, backend)
		return
	}
	prev := map[string]lb.State{}
	for _, s := range p.known[backend] {
		prev[s.name] = s.status.State
	}
	kept := append([]server(nil), servers...)
	for i := range kept {
		// A server restored healthy reads as up with its first check
		// pending (Initial) until that check ends; it is still the
		// healthy server it was, should the process change again.
		if s := &kept[i]; s.status.State == lb.Initial && prev[s.name] == lb.Healthy && s.stat != nil && strings.HasPrefix(s.stat.Status, "UP") {
			s.status.State = lb.Healthy
		}
	}
	p.known[backend] = kept
}

// restoreLocked re-adds the remembered servers a new process lacks.
// p.mu is held.
func (p *Provider) restoreLocked(ctx context.Context) error {
	var errs []error
	for backend, servers := range p.known {
		out, err := p.c.run(ctx, "show servers state "+backend)
		if err != nil {
			return fmt.Errorf("restoring servers of backend %s: %w", backend, err)
		}
		rows, err := parseServersState(out)
		if errors.Is(err, lb.ErrGroupNotFound) {
			continue // the new configuration dropped the backend
		}
		if err != nil {
			return fmt.Errorf("restoring servers of backend %s: %w", backend, err)
		}
		present := map[string]bool{}
		for _, r := range rows {
			present[r.Name] = true
		}
		for _, s := range servers {
			if present[s.name] || s.admin&admMaint != 0 {
				continue // there already, or leaving anyway
			}
			if err := p.restore(ctx, backend, s); err != nil {
				errs = append(errs, fmt.Errorf("restoring %v in backend %s: %w", s.addr, backend, err))
				if fatal(err) {
					break
				}
			}
		}
	}
	return errors.Join(errs...)
}

// restore adds one server back in its last known state.
func (p *Provider) restore(ctx context.Context, backend string, s server) error {
	ref := backend + "/" + s.name
	add := "add server " + ref + " " + formatAddr(s.addr) + " "
	switch {
	case s.admin&admDrain != 0:
		if err := p.do(ctx, []string{add + p.restoreArgs + withCheckPort(s.checkPort)}, msgNewServer, msgExists); err != nil {
			return err
		}
		return p.do(ctx, []string{"enable health " + ref, "set server " + ref + " state drain"})
	case s.status.State == lb.Healthy:
		// Added at full weight: it takes traffic the moment it leaves
		// maintenance.
		if err := p.do(ctx, []string{add + p.restoreArgs + withCheckPort(s.checkPort)}, msgNewServer, msgExists); err != nil {
			return err
		}
		return p.do(ctx, []string{"enable health " + ref, "set server " + ref + " state ready"})
	default:
		if err := p.do(ctx, []string{add + p.addArgs + withCheckPort(s.checkPort)}, msgNewServer, msgExists); err != nil {
			return err
		}
		return p.activate(ctx, ref)
	}
}

// Watch polls "show info" every WatchInterval until ctx ends, restoring
// the remembered servers as soon as a new HAProxy process answers. Errors
// (HAProxy down for a moment) are retried on the next tick; onError, if not
// nil, hears about them. Watch returns at once when watching is disabled.
func (p *Provider) Watch(ctx context.Context, onError func(error)) {
	if p.watch <= 0 {
		return
	}
	t := time.NewTicker(p.watch)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := p.poll(ctx); err != nil && onError != nil && ctx.Err() == nil {
			onError(err)
		}
	}
}

// poll reads the process identity once and restores if it changed.
func (p *Provider) poll(ctx context.Context) error {
	out, err := p.c.run(ctx, "show info")
	if err != nil {
		return fmt.Errorf("watching for a new haproxy process: %w", err)
	}
	pr, err := parseInfo(out)
	if err != nil {
		return fmt.Errorf("watching for a new haproxy process: %w", err)
	}
	if _, err := p.seen(ctx, pr); err != nil {
		return fmt.Errorf("watching for a new haproxy process: %w", err)
	}
	return nil
}

// Restarts is how many times a new HAProxy process was seen (and the
// remembered servers restored) since the provider was created.
func (p *Provider) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// Address is the runtime API address the provider talks to.
func (p *Provider) Address() string { return p.c.address }

// DrainTime implements the binding reconciler's DrainTimer: a server in
// drain gets no new load-balanced connection at once (sticky sessions
// aside, for at most MaxDrain).
func (p *Provider) DrainTime(context.Context, string) (time.Duration, error) { return 0, nil }
