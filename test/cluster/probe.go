package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// startProbes starts the probe loops of c's current run: the startup
// probe first if it has one (startup true), else readiness and liveness.
// Probes dial the pod's address from the root namespace (HTTP, TCP) or run
// in the node namespace (exec); they stop when the run ends.
func (w *podWorker) startProbes(_ context.Context, c *container, startup bool) {
	ctx, gen := c.runCtx, c.gen
	report := func(kind probeKind) func(bool) bool {
		return func(ok bool) bool {
			w.send(event{kind: evProbe, c: c, gen: gen, probe: kind, ok: ok})
			// Startup probes end at their first verdict, liveness at a failure.
			return !(kind == probeStartup || kind == probeLiveness && !ok)
		}
	}
	env, bin := c.proc.cmd.Env, c.binary
	if startup && c.spec.StartupProbe != nil {
		go w.probeLoop(ctx, c, c.spec.StartupProbe, nil, env, bin, report(probeStartup))
		return
	}
	if p := c.spec.ReadinessProbe; p != nil {
		f := false
		go w.probeLoop(ctx, c, p, &f, env, bin, report(probeReadiness))
	}
	if p := c.spec.LivenessProbe; p != nil {
		t := true
		go w.probeLoop(ctx, c, p, &t, env, bin, report(probeLiveness))
	}
}

// probeLoop runs probe every period. Once successThreshold successes or
// failureThreshold failures in a row settle a verdict that differs from the
// last one reported (initial; nil: none yet), it calls report; it stops
// when report returns false or ctx ends.
func (w *podWorker) probeLoop(ctx context.Context, c *container, p *corev1.Probe, initial *bool, env []string, bin string, report func(bool) bool) {
	period := secondsOr(p.PeriodSeconds, 10)
	timeout := secondsOr(p.TimeoutSeconds, 1)
	successes := max(int(p.SuccessThreshold), 1)
	failures := max(int(p.FailureThreshold), 1)
	if p.FailureThreshold == 0 {
		failures = 3
	}
	var last *bool
	if initial != nil {
		v := *initial
		last = &v
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Duration(p.InitialDelaySeconds) * time.Second):
	}
	ok, bad := 0, 0
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := w.check(pctx, c, bin, &p.ProbeHandler, env)
		cancel()
		if ctx.Err() != nil {
			return
		}
		var verdict *bool
		if err == nil {
			ok, bad = ok+1, 0
			if ok >= successes {
				v := true
				verdict = &v
			}
		} else {
			ok, bad = 0, bad+1
			if bad >= failures {
				v := false
				verdict = &v
			}
			w.log.Debug("probe failed", "container", c.spec.Name, "error", err)
		}
		if verdict != nil && (last == nil || *last != *verdict) {
			last = verdict
			if !report(*verdict) {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func secondsOr(s int32, def int) time.Duration {
	if s <= 0 {
		s = int32(def)
	}
	return time.Duration(s) * time.Second
}

// check runs one probe handler against the pod.
func (w *podWorker) check(ctx context.Context, c *container, bin string, h *corev1.ProbeHandler, env []string) error {
	switch {
	case h.HTTPGet != nil:
		return w.httpGet(ctx, c, h.HTTPGet)
	case h.TCPSocket != nil:
		port, err := resolvePort(c, h.TCPSocket.Port)
		if err != nil {
			return err
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(w.ip.String(), strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	case h.Exec != nil:
		return w.runInPod(ctx, &c.spec, bin, h.Exec.Command, env)
	case h.GRPC != nil:
		// No gRPC health client here: a TCP connect stands in for it.
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(w.ip.String(), strconv.Itoa(int(h.GRPC.Port))))
		if err != nil {
			return err
		}
		return conn.Close()
	}
	return fmt.Errorf("probe has no handler")
}

// probeClient never follows redirects (a 3xx counts as success, as for the
// kubelet) and never keeps connections between probes.
var probeClient = &http.Client{
	Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		DisableKeepAlives: true,
	},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// httpGet probes the pod's own address. The probe's host field is ignored:
// the cluster only ever sends traffic to addresses it created.
func (w *podWorker) httpGet(ctx context.Context, c *container, g *corev1.HTTPGetAction) error {
	port, err := resolvePort(c, g.Port)
	if err != nil {
		return err
	}
	scheme := "http"
	if g.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	p := g.Path
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	url := scheme + "://" + net.JoinHostPort(w.ip.String(), strconv.Itoa(port)) + p
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "kube-probe/1.36")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	return nil
}

// resolvePort turns a probe or hook port (number or container port name)
// into a number.
func resolvePort(c *container, p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.spec.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.spec.Name, p.StrVal)
}

// sleepRE matches an exec hook that only sleeps: `sleep N` or
// `sh -c "sleep N"`. Such hooks are run as a timer.
var sleepRE = regexp.MustCompile(`^\s*(?:/bin/|/usr/bin/)?sleep\s+([0-9]+(?:\.[0-9]+)?)s?\s*$`)

// runHook runs a lifecycle hook until it ends or ctx (the grace period)
// ends.
func (w *podWorker) runHook(ctx context.Context, c *container, bin string, h *corev1.LifecycleHandler, env []string) error {
	switch {
	case h.Sleep != nil:
		return sleepCtx(ctx, time.Duration(h.Sleep.Seconds)*time.Second)
	case h.Exec != nil:
		if d, ok := sleepDuration(h.Exec.Command); ok {
			return sleepCtx(ctx, d)
		}
		return w.runInPod(ctx, &c.spec, bin, h.Exec.Command, env)
	case h.HTTPGet != nil:
		return w.httpGet(ctx, c, h.HTTPGet)
	case h.TCPSocket != nil:
		return nil // deprecated and a no-op in the kubelet too
	}
	return nil
}

// sleepDuration recognises a command that only sleeps.
func sleepDuration(argv []string) (time.Duration, bool) {
	s := strings.Join(argv, " ")
	if len(argv) == 3 && (argv[0] == "sh" || argv[0] == "/bin/sh" || argv[0] == "bash" || argv[0] == "/bin/bash") && argv[1] == "-c" {
		s = argv[2]
	}
	m := sleepRE.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
