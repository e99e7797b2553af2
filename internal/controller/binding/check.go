package binding

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/lb/aws"
)

// defaultGrace is Kubernetes' terminationGracePeriodSeconds default.
const defaultGrace = 30 * time.Second

// checkTimeout bounds one drain-time check, so that a slow or throttled
// API delays a reconcile only a little; a failed check is tried again
// after CheckInterval.
const checkTimeout = 10 * time.Second

// checks remembers when each group of each binding was last checked, and
// against which grace period.
type checks struct {
	mu     sync.Mutex
	last   map[checkKey]checked
	drains map[checkKey]drainTime
}

type drainTime struct {
	d  time.Duration
	at time.Time
}

type checkKey struct {
	binding types.NamespacedName
	group   string
}

type checked struct {
	at    time.Time
	grace time.Duration
}

func newChecks() *checks {
	return &checks{last: map[checkKey]checked{}, drains: map[checkKey]drainTime{}}
}

// drain returns a group's provider drain time read less than every ago.
func (c *checks) drain(k checkKey, now time.Time, every time.Duration) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.drains[k]
	if !ok || now.Sub(d.at) >= every {
		return 0, false
	}
	return d.d, true
}

func (c *checks) setDrain(k checkKey, d time.Duration, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drains[k] = drainTime{d: d, at: now}
}

// due reports whether the group should be checked now against grace, and
// if so records the check.
func (c *checks) due(k checkKey, grace time.Duration, now time.Time, every time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.last[k]
	if ok && l.grace == grace && now.Sub(l.at) < every {
		return false
	}
	c.last[k] = checked{at: now, grace: grace}
	return true
}

func (c *checks) forget(b types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.last {
		if k.binding == b {
			delete(c.last, k)
		}
	}
	for k := range c.drains {
		if k.binding == b {
			delete(c.drains, k)
		}
	}
}

// podGrace is the shortest terminationGracePeriodSeconds of the binding's
// live pods: the drain must fit in every pod's grace period. False when
// no pod is live.
func podGrace(pods []*corev1.Pod) (time.Duration, bool) {
	var grace time.Duration
	found := false
	for _, p := range pods {
		if !live(p) {
			continue
		}
		g := defaultGrace
		if s := p.Spec.TerminationGracePeriodSeconds; s != nil {
			g = time.Duration(max(*s, 0)) * time.Second
		}
		if !found || g < grace {
			grace, found = g, true
		}
	}
	return grace, found
}

// checkDelays warns, with a DeregistrationDelayTooLong Event on the binding
// at most every CheckInterval per group, when a provider that drains on its
// own timer (AWS) keeps sending traffic to a deregistered target for longer
// than the pods' grace period leaves room for. Lookup errors are logged and
// tried again after CheckInterval.
func (r *Reconciler) checkDelays(ctx context.Context, b *v1alpha1.LoadBalancerBinding, prov lb.Provider, groups []string, pods []*corev1.Pod) {
	dc, ok := prov.(DelayChecker)
	if !ok {
		return
	}
	grace, ok := podGrace(pods)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
	now := r.opts.Now()
	for _, g := range groups {
		if !r.checks.due(checkKey{key, g}, grace, now, r.opts.CheckInterval) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		err := dc.Check(cctx, g, grace)
		cancel()
		switch {
		case err == nil:
		case errors.Is(err, aws.ErrDelayTooLong):
			r.log.Warn("deregistration delay too long", "binding", key, "group", g, "err", err)
			r.event(b, nil, corev1.EventTypeWarning, "DeregistrationDelayTooLong", "Check", err.Error())
		default:
			r.log.Info("checking the deregistration delay failed", "binding", key, "group", g, "err", err)
		}
	}
}

// HealthCheckPortProblem says why a group's health-check port (as AWS
// states it: "traffic-port" or a number) does not match the binding's
// healthCheckPort; "" when it does, or when the binding sets none.
func HealthCheckPortProblem(b *v1alpha1.LoadBalancerBinding, group, got string) string {
	want := b.Spec.HealthCheckPort
	if want == nil || got == strconv.Itoa(int(*want)) {
		return ""
	}
	return fmt.Sprintf("target group %s health-checks %q, but the binding's healthCheckPort is %d: "+
		"set the target group's HealthCheckPort to %d (or change healthCheckPort)", group, got, *want, *want)
}

// checkHealthCheckPorts warns, with a HealthCheckPortMismatch Event on the
// binding at most every CheckInterval per group, when a provider that owns
// its groups' health-check port (AWS) checks another port than the
// binding's healthCheckPort. Lookup errors are logged.
func (r *Reconciler) checkHealthCheckPorts(ctx context.Context, b *v1alpha1.LoadBalancerBinding, prov lb.Provider, groups []string) {
	hr, ok := prov.(HealthCheckPortReader)
	if !ok || b.Spec.HealthCheckPort == nil {
		return
	}
	key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
	now := r.opts.Now()
	for _, g := range groups {
		// The port stands in for the grace period: a changed port is
		// checked at once.
		if !r.checks.due(checkKey{key, "healthCheckPort " + g}, time.Duration(*b.Spec.HealthCheckPort), now, r.opts.CheckInterval) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		got, err := hr.HealthCheckPort(cctx, g)
		cancel()
		if err != nil {
			r.log.Info("reading the health-check port failed", "binding", key, "group", g, "err", err)
			continue
		}
		if msg := HealthCheckPortProblem(b, g, got); msg != "" {
			r.log.Warn("health-check port mismatch", "binding", key, "group", g, "msg", msg)
			r.event(b, nil, corev1.EventTypeWarning, "HealthCheckPortMismatch", "Check", msg)
		}
	}
}
