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

// seen records which process answered a listing begun at epoch (see
// listing). It reports true when the listing is stale and must be read
// again:
//   - a different, newer process answered: the servers remembered for
//     every backend are restored into it first;
//   - a process already replaced answered: during a takeover ("haproxy
//     -x", or a master-worker reload) the old and the new process both
//     accept on the runtime API socket until the old one stops listening;
//   - the right process answered, but a restore ran since the listing
//     began (a watch tick), so the listing may predate it: taken as it
//     is, an empty backend would be remembered and the servers registered
//     again from scratch, waiting for a fresh rise.
func (p *Provider) seen(ctx context.Context, pr process, epoch uint64) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := p.proc
	switch {
	case prev == (process{}):
		p.proc = pr
		return false, nil
	case prev == pr:
		return p.epoch != epoch, nil
	case p.retired[pr] && pr.start <= prev.start:
		return true, nil
	}
	began := time.Now()
	restored, err := p.restoreLocked(ctx, pr)
	if err != nil {
		// p.proc stays the old process, so the next listing or watch tick
		// tries the restore again instead of taking the new one as known.
		return true, err
	}
	if p.onRestore != nil {
		p.onRestore(pr.pid, restored, time.Since(began))
	}
	p.restarts++
	p.epoch++
	if len(p.retired) >= 8 {
		clear(p.retired)
	}
	p.retired[prev] = true
	delete(p.retired, pr)
	p.proc = pr
	return true, nil
}

// listing is the epoch a listing starts in: see seen.
func (p *Provider) listing() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epoch
}

// remember keeps backend's servers as listed by process pr, unless another
// process has been seen since, and returns them as the caller should see
// them: a server restored healthy reads as up with its first check
// pending (Initial) until that check ends, yet it takes traffic and is
// still the healthy server it was, so it stays Healthy.
func (p *Provider) remember(pr process, backend string, servers []server) []server {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(servers) == 0 {
		if p.proc == pr {
			delete(p.known, backend)
		}
		return servers
	}
	prev := map[string]lb.State{}
	for _, s := range p.known[backend] {
		prev[s.name] = s.status.State
	}
	for i := range servers {
		if s := &servers[i]; s.status.State == lb.Initial && prev[s.name] == lb.Healthy && s.stat != nil && strings.HasPrefix(s.stat.Status, "UP") {
			s.status.State = lb.Healthy
		}
	}
	if p.proc == pr {
		p.known[backend] = append([]server(nil), servers...)
	}
	return servers
}

// restoreLocked re-adds the remembered servers the new process pr lacks.
// Every command goes to pr (see on). p.mu is held.
// It returns how many servers it added.
func (p *Provider) restoreLocked(ctx context.Context, pr process) (int, error) {
	var errs []error
	restored := 0
	for backend, servers := range p.known {
		out, err := p.on(ctx, pr, "show servers state "+backend)
		if err != nil {
			return restored, fmt.Errorf("restoring servers of backend %s: %w", backend, err)
		}
		rows, err := parseServersState(out)
		if errors.Is(err, lb.ErrGroupNotFound) {
			continue // the new configuration dropped the backend
		}
		if err != nil {
			return restored, fmt.Errorf("restoring servers of backend %s: %w", backend, err)
		}
		present := map[string]bool{}
		for _, r := range rows {
			present[r.Name] = true
		}
		for _, s := range servers {
			if present[s.name] || s.admin&admMaint != 0 {
				continue // there already, or leaving anyway
			}
			if err := p.restore(ctx, pr, backend, s); err != nil {
				errs = append(errs, fmt.Errorf("restoring %v in backend %s: %w", s.addr, backend, err))
				if fatal(err) {
					break
				}
				continue
			}
			restored++
		}
	}
	return restored, errors.Join(errs...)
}

// restore adds one server back into process pr in its last known state.
func (p *Provider) restore(ctx context.Context, pr process, backend string, s server) error {
	ref := backend + "/" + s.name
	add := "add server " + ref + " " + formatAddr(s.addr) + " "
	switch {
	case s.admin&admDrain != 0:
		if err := p.doOn(ctx, pr, []string{add + p.restoreArgs + withCheckPort(s.checkPort)}, msgNewServer, msgExists); err != nil {
			return err
		}
		return p.doOn(ctx, pr, []string{"enable health " + ref, "set server " + ref + " state drain"})
	case s.status.State == lb.Healthy:
		// Added at full weight: it takes traffic the moment it leaves
		// maintenance.
		if err := p.doOn(ctx, pr, []string{add + p.restoreArgs + withCheckPort(s.checkPort)}, msgNewServer, msgExists); err != nil {
			return err
		}
		return p.doOn(ctx, pr, []string{"enable health " + ref, "set server " + ref + " state ready"})
	default:
		if err := p.doOn(ctx, pr, []string{add + p.addArgs + withCheckPort(s.checkPort)}, msgNewServer, msgExists); err != nil {
			return err
		}
		if err := p.doOn(ctx, pr, []string{"enable health " + ref}); err != nil {
			return err
		}
		return p.doOn(ctx, pr, activation(ref, p.weight))
	}
}

// errOtherProcess: the runtime API socket kept answering from another
// process than the one a command was meant for.
var errOtherProcess = errors.New("another haproxy process answered")

// onAttempts bounds the tries of on; onPause is the pause between them.
const (
	onAttempts = 20
	onPause    = 10 * time.Millisecond
)

// on runs cmds on one line in process pr: the line starts with "show
// info", whose Pid says which process ran it, and is sent again while
// another process answers (while two processes share the runtime API
// socket, each connection goes to either). It returns the answer after
// the info.
func (p *Provider) on(ctx context.Context, pr process, cmds ...string) (string, error) {
	for i := 1; ; i++ {
		out, err := p.c.run(ctx, append([]string{"show info"}, cmds...)...)
		if err != nil {
			return "", err
		}
		info, rest, err := splitInfo(out)
		if err != nil {
			return "", err
		}
		got, err := parseInfo(info)
		if err != nil {
			return "", err
		}
		if got.pid == pr.pid {
			return rest, nil
		}
		if i >= onAttempts {
			return "", fmt.Errorf("sending %q to haproxy process %d: process %d answered %d times: %w", verb(cmds[0]), pr.pid, got.pid, i, errOtherProcess)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(onPause):
		}
	}
}

// doOn is do in process pr (see on).
func (p *Provider) doOn(ctx context.Context, pr process, cmds []string, ok ...string) error {
	out, err := p.on(ctx, pr, cmds...)
	if err != nil {
		return err
	}
	return classify(out, ok...)
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
	if _, err := p.seen(ctx, pr, p.listing()); err != nil {
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
