package binding

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/lb/aws"
)

// DrainTimer is a provider that can say, per group, how long it may still
// send new connections to a target after deregistering it (AWS: the
// deregistration delay plus a margin; HAProxy: nothing new once in drain).
type DrainTimer interface {
	DrainTime(ctx context.Context, group string) (time.Duration, error)
}

var _ DrainTimer = (*aws.Provider)(nil)

// defaultDrainMaxWait is sluice proxy's --drain-max-wait default.
const defaultDrainMaxWait = 60 * time.Second

// Timers are the drain-related timers of one binding; a zero Known field
// means that timer could not be found out and is not compared.
type Timers struct {
	// ProviderDrain: how long the load balancer may still send new
	// connections to a deregistered target (the longest over the groups).
	ProviderDrain      time.Duration
	ProviderDrainKnown bool
	// DrainTimeout is the binding's drain.timeout.
	DrainTimeout time.Duration
	// DrainMaxWait is the proxy pods' --drain-max-wait (the shortest).
	DrainMaxWait      time.Duration
	DrainMaxWaitKnown bool
	// Grace is the pods' terminationGracePeriodSeconds (the shortest).
	Grace      time.Duration
	GraceKnown bool
}

// Check says whether the timers fit together, and the worst case. A
// deleted pod must keep serving for as long as the load balancer may send
// it new connections; so that drain must fit within drain.timeout (else
// the pod is marked drained too soon), within the proxy's --drain-max-wait
// (else the proxy stops accepting while connections still arrive), and
// within terminationGracePeriodSeconds (else the kubelet kills it).
func (t Timers) Check() (bool, string) {
	if !t.ProviderDrainKnown {
		return true, "the provider's drain time is not known yet"
	}
	var problems []string
	if t.DrainTimeout < t.ProviderDrain {
		problems = append(problems, fmt.Sprintf("drain.timeout %v is shorter: pods are marked drained while connections still arrive", t.DrainTimeout))
	}
	if t.DrainMaxWaitKnown && t.DrainMaxWait < t.ProviderDrain {
		problems = append(problems, fmt.Sprintf("the proxy's --drain-max-wait %v is shorter: it stops accepting while connections still arrive", t.DrainMaxWait))
	}
	if t.GraceKnown && t.Grace < t.ProviderDrain {
		problems = append(problems, fmt.Sprintf("terminationGracePeriodSeconds %v is shorter: the kubelet kills pods the load balancer still sends to", t.Grace))
	}
	if t.GraceKnown && t.DrainMaxWaitKnown && t.Grace < t.DrainMaxWait {
		problems = append(problems, fmt.Sprintf("terminationGracePeriodSeconds %v is shorter than the proxy's --drain-max-wait %v: the kubelet may kill a proxy still waiting for the load balancer", t.Grace, t.DrainMaxWait))
	}
	worst := fmt.Sprintf("worst case: the load balancer sends new connections to a deregistered target for up to %v", t.ProviderDrain)
	if len(problems) > 0 {
		return false, worst + "; " + strings.Join(problems, "; ")
	}
	parts := []string{worst, fmt.Sprintf("drain.timeout %v", t.DrainTimeout)}
	if t.DrainMaxWaitKnown {
		parts = append(parts, fmt.Sprintf("--drain-max-wait %v", t.DrainMaxWait))
	}
	if t.GraceKnown {
		parts = append(parts, fmt.Sprintf("terminationGracePeriodSeconds %v", t.Grace))
	}
	return true, strings.Join(parts, "; ") + ": all fit"
}

// drainMaxWait reads --drain-max-wait from the sluice proxy containers of
// the binding's live pods (arguments "proxy ... --drain-max-wait=D" or
// "--drain-max-wait D", one or two dashes), the flag's default when a
// proxy container does not set it; false when no container runs
// "sluice proxy" or a value does not parse (the proxy itself would refuse
// it).
func drainMaxWait(pods []*corev1.Pod) (time.Duration, bool) {
	var shortest time.Duration
	found := false
	for _, p := range pods {
		if !live(p) {
			continue
		}
		for _, c := range p.Spec.Containers {
			d, ok := proxyDrainMaxWait(append(append([]string(nil), c.Command...), c.Args...))
			if ok && (!found || d < shortest) {
				shortest, found = d, true
			}
		}
	}
	return shortest, found
}

// proxyDrainMaxWait finds --drain-max-wait in one container's command
// line; ok is false unless it is a "proxy" subcommand with a valid value.
func proxyDrainMaxWait(argv []string) (time.Duration, bool) {
	isProxy := false
	d := defaultDrainMaxWait
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if a == "proxy" {
			isProxy = true
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "drain-max-wait" {
			continue
		}
		if !hasValue {
			if i+1 >= len(argv) {
				return 0, false
			}
			i++
			value = argv[i]
		}
		v, err := time.ParseDuration(value)
		if err != nil {
			return 0, false
		}
		d = max(v, 0)
	}
	return d, isProxy
}

// drainTimes caches each group's provider drain time for CheckInterval.
func (r *Reconciler) drainTime(ctx context.Context, key types.NamespacedName, dt DrainTimer, groups []string) (time.Duration, bool) {
	now := r.opts.Now()
	var longest time.Duration
	for _, g := range groups {
		d, ok := r.checks.drain(checkKey{key, g}, now, r.opts.CheckInterval)
		if !ok {
			cctx, cancel := context.WithTimeout(ctx, checkTimeout)
			v, err := dt.DrainTime(cctx, g)
			cancel()
			if err != nil {
				r.log.Info("reading the provider's drain time failed", "binding", key, "group", g, "err", err)
				return 0, false
			}
			r.checks.setDrain(checkKey{key, g}, v, now)
			d = v
		}
		longest = max(longest, d)
	}
	return longest, true
}

// timers computes the TimersConsistent condition and returns its setter;
// an Event goes out when it turns False.
func (r *Reconciler) timers(ctx context.Context, b *v1alpha1.LoadBalancerBinding, prov lb.Provider, groups []string, pods []*corev1.Pod) func(*v1alpha1.LoadBalancerBindingStatus) {
	key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
	_, _, timeout := Settings(b)
	t := Timers{DrainTimeout: timeout}
	if dt, ok := prov.(DrainTimer); ok {
		t.ProviderDrain, t.ProviderDrainKnown = r.drainTime(ctx, key, dt, groups)
	}
	t.DrainMaxWait, t.DrainMaxWaitKnown = drainMaxWait(pods)
	t.Grace, t.GraceKnown = podGrace(pods)
	ok, msg := t.Check()
	c := metav1.Condition{Type: v1alpha1.ConditionTimersConsistent, Status: metav1.ConditionTrue, Reason: "TimersFit",
		Message: truncate(msg), ObservedGeneration: b.Generation}
	if !ok {
		c.Status, c.Reason = metav1.ConditionFalse, "TimersInconsistent"
		if prev := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionTimersConsistent); prev == nil || prev.Status != metav1.ConditionFalse || prev.Message != c.Message {
			r.event(b, nil, corev1.EventTypeWarning, "TimersInconsistent", "Check", msg)
		}
	}
	return func(st *v1alpha1.LoadBalancerBindingStatus) { meta.SetStatusCondition(&st.Conditions, c) }
}
