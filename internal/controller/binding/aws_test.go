package binding_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/binding"
	ct "sluice.dev/sluice/internal/controller/controllertest"
	provider "sluice.dev/sluice/internal/controller/lbcache"
	"sluice.dev/sluice/internal/controller/podstatus"
	state "sluice.dev/sluice/internal/controller/snapshot"
	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/lb/aws"
	"sluice.dev/sluice/internal/lb/aws/awsfake"
)

// The AWS tests run the binding and pod-status reconcilers against the
// real provider stack (provider.Cache → lb/aws → aws-sdk-go-v2) and an
// in-process awsfake at 50× speed: health checks every 100ms, healthy
// after two, real HTTP checks against one server per pod on 127.0.0.x.

const awsSpeed = 50

// pod backends answer /healthz always and /ready while ready is set.
type podBackend struct {
	ready atomic.Bool
	srv   *http.Server
}

type awsEnv struct {
	t        *testing.T
	f        *awsfake.Fake
	c        client.WithWatch
	rec      *ct.Recorder
	clock    *ct.Clock
	store    *state.Store
	reg      *prometheus.Registry
	br       *binding.Reconciler
	pr       *podstatus.Reconciler
	port     int
	mu       sync.Mutex
	backends map[string]*podBackend // by pod IP
	errs     []error                // binding reconcile errors
}

func newAWSEnv(t *testing.T, cluster string) *awsEnv {
	t.Helper()
	ct.IsolateAWS(t)
	e := &awsEnv{t: t, f: ct.AWSFake(t, awsSpeed), rec: &ct.Recorder{}, clock: ct.NewClock(),
		store: state.NewStore(), reg: prometheus.NewRegistry(), backends: map[string]*podBackend{}}
	e.c = ct.NewClient(interceptor.Funcs{})
	opts := ct.AWSOptions(e.f.URL())
	opts.Registerer = e.reg
	cache := provider.New(provider.Options{AWS: opts, AWSCluster: cluster})
	timeline := state.NewTimeline()
	var err error
	e.br, err = binding.New(binding.Options{Client: e.c, Providers: cache, Store: e.store, Timeline: timeline,
		Recorder: e.rec, Now: e.clock.Now, FastRequeue: time.Millisecond, SlowRequeue: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.pr, err = podstatus.New(podstatus.Options{Client: e.c, Store: e.store, Timeline: timeline, Recorder: e.rec})
	if err != nil {
		t.Fatal(err)
	}
	// One port for every pod, each on its own loopback address.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	e.port = ln.Addr().(*net.TCPAddr).Port
	e.serve("127.0.0.2", ln)
	return e
}

// group adds a target group of type ip with AWS-shaped timings (scaled:
// checks every 100ms, two to change state) checking path on the traffic
// port.
func (e *awsEnv) group(name, path string, delay time.Duration, tags map[string]string) string {
	e.t.Helper()
	arn, err := e.f.AddTargetGroup(awsfake.TargetGroup{Name: name, Port: e.port, HealthCheckPath: path,
		HealthCheckInterval: 5 * time.Second, HealthyThreshold: 2, UnhealthyThreshold: 2,
		DeregistrationDelay: delay, Tags: tags})
	if err != nil {
		e.t.Fatal(err)
	}
	return arn
}

func (e *awsEnv) serve(ip string, ln net.Listener) *podBackend {
	b := &podBackend{}
	b.ready.Store(true)
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {})
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !b.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	b.srv = &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	e.t.Cleanup(func() { _ = b.srv.Close() })
	e.mu.Lock()
	e.backends[ip] = b
	e.mu.Unlock()
	return b
}

// pod creates a pod on 127.0.0.N serving the health endpoints, with a
// finalizer so that a deletion leaves it terminating.
func (e *awsEnv) pod(name, ip string, opts ...ct.PodOpt) *podBackend {
	e.t.Helper()
	e.mu.Lock()
	b := e.backends[ip]
	e.mu.Unlock()
	if b == nil {
		ln, err := net.Listen("tcp", fmt.Sprintf("%s:%d", ip, e.port))
		if err != nil {
			e.t.Fatal(err)
		}
		b = e.serve(ip, ln)
	}
	p := ct.Pod(name, ip, append([]ct.PodOpt{func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports[0].ContainerPort = int32(e.port)
		p.Finalizers = []string{"test/hold"}
	}}, opts...)...)
	if err := e.c.Create(context.Background(), p); err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *awsEnv) deletePod(name string) {
	e.t.Helper()
	if err := e.c.Delete(context.Background(), ct.Pod(name, "")); err != nil {
		e.t.Fatal(err)
	}
}

func awsBinding(name string, arns ...string) *v1alpha1.LoadBalancerBinding {
	return ct.Binding(name, func(b *v1alpha1.LoadBalancerBinding) {
		b.Spec.Provider = v1alpha1.ProviderSpec{AWS: &v1alpha1.AWSProvider{TargetGroupARNs: arns}}
	})
}

// round reconciles the binding, then every pod, as the manager would on
// the events and requeues.
func (e *awsEnv) round(bindingName string) {
	e.t.Helper()
	ctx := context.Background()
	_, err := e.br.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ct.Namespace, Name: bindingName}})
	if err != nil {
		e.errs = append(e.errs, err)
	}
	var pods corev1.PodList
	if err := e.c.List(ctx, &pods); err != nil {
		e.t.Fatal(err)
	}
	for _, p := range pods.Items {
		if _, err := e.pr.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)}); err != nil {
			e.t.Fatalf("pod %s: %v", p.Name, err)
		}
	}
}

// until runs rounds until cond holds; every round's state goes to check
// first (nil: none).
func (e *awsEnv) until(bindingName, what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("waiting for %s: timed out; snapshot %s; reconcile errors %v", what, e.describe(bindingName), e.errs)
		}
		e.round(bindingName)
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *awsEnv) describe(bindingName string) string {
	s := e.store.Get(types.NamespacedName{Namespace: ct.Namespace, Name: bindingName})
	if s == nil {
		return "none"
	}
	var parts []string
	for _, g := range s.Groups {
		var ts []string
		for _, st := range g.Targets {
			ts = append(ts, st.Target.String()+"="+string(st.State))
		}
		parts = append(parts, fmt.Sprintf("%s[%s] err=%v", arnName(g.Name), strings.Join(ts, " "), g.Err))
	}
	return strings.Join(parts, "; ")
}

func arnName(arn string) string {
	parts := strings.Split(arn, "/")
	if len(parts) < 2 {
		return arn
	}
	return parts[1]
}

// podCond is the pod's condition typ as "Status/Reason" ("" if absent or
// the pod is gone).
func (e *awsEnv) podCond(name string, typ corev1.PodConditionType) string {
	var p corev1.Pod
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: ct.Namespace, Name: name}, &p); err != nil {
		return ""
	}
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return string(c.Status) + "/" + c.Reason
		}
	}
	return ""
}

func (e *awsEnv) gateMessage(name string) string {
	var p corev1.Pod
	_ = e.c.Get(context.Background(), types.NamespacedName{Namespace: ct.Namespace, Name: name}, &p)
	for _, c := range p.Status.Conditions {
		if c.Type == v1alpha1.ReadinessGateHealthy {
			return c.Message
		}
	}
	return ""
}

func (e *awsEnv) gates(names ...string) func() bool {
	return func() bool {
		for _, n := range names {
			if e.podCond(n, v1alpha1.ReadinessGateHealthy) != "True/TargetHealthy" {
				return false
			}
		}
		return true
	}
}

// held is what the fake holds in a group, "ip=state" sorted.
func (e *awsEnv) held(arn string) []string {
	var out []string
	for _, t := range e.f.Targets(arn) {
		out = append(out, fmt.Sprintf("%s:%d=%s", t.ID, t.Port, t.State))
	}
	return out
}

func (e *awsEnv) want(state string, ips ...string) []string {
	var out []string
	for _, ip := range ips {
		out = append(out, fmt.Sprintf("%s:%d=%s", ip, e.port, state))
	}
	slices.Sort(out)
	return out
}

// state is the pod IP's target state in a group of the binding's last
// snapshot ("" if not listed).
func (e *awsEnv) state(bindingName, group, ip string) lb.State {
	s := e.store.Get(types.NamespacedName{Namespace: ct.Namespace, Name: bindingName})
	t := lb.Target{Address: netip.AddrPortFrom(netip.MustParseAddr(ip), uint16(e.port))}
	if g := s.Group(group); g != nil {
		st, _ := g.Status(t)
		return st.State
	}
	return ""
}

func (e *awsEnv) bindingCond(name, typ string) metav1.Condition {
	var b v1alpha1.LoadBalancerBinding
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: ct.Namespace, Name: name}, &b); err != nil {
		e.t.Fatal(err)
	}
	return condition(&b, typ)
}

// TestAWSGateNeedsEveryGroup: a binding with two target groups (say an
// internet-facing and an internal one, checking different paths) opens a
// pod's readiness gate only once both check it healthy.
func TestAWSGateNeedsEveryGroup(t *testing.T) {
	e := newAWSEnv(t, "")
	public := e.group("public", "/healthz", 10*time.Second, nil)
	internal := e.group("internal", "/ready", 10*time.Second, nil)
	e.pod("p1", "127.0.0.2")
	p2 := e.pod("p2", "127.0.0.3")
	p2.ready.Store(false) // healthy for public, not for internal
	if err := e.c.Create(context.Background(), awsBinding("b", public, internal)); err != nil {
		t.Fatal(err)
	}

	e.until("b", "p1 healthy in both groups", e.gates("p1"))
	e.until("b", "p2 unhealthy in the internal group", func() bool {
		return e.state("b", public, "127.0.0.3") == lb.Healthy && e.state("b", internal, "127.0.0.3") == lb.Unhealthy
	})
	e.round("b")
	if got := e.podCond("p2", v1alpha1.ReadinessGateHealthy); got != "False/TargetNotHealthy" {
		t.Fatalf("p2 healthy only in public: gate %q", got)
	}
	if msg := e.gateMessage("p2"); !strings.Contains(msg, "unhealthy in "+internal) || strings.Contains(msg, public) {
		t.Errorf("p2 gate message %q should name only the internal group", msg)
	}
	p2.ready.Store(true)
	e.until("b", "p2 healthy in both groups", e.gates("p2"))
	for _, arn := range []string{public, internal} {
		if got, want := e.held(arn), e.want("healthy", "127.0.0.2", "127.0.0.3"); !slices.Equal(got, want) {
			t.Errorf("%s holds %v, want %v", arnName(arn), got, want)
		}
	}
	if len(e.errs) > 0 {
		t.Errorf("reconcile errors: %v", e.errs)
	}
	if c := e.bindingCond("b", v1alpha1.ConditionReady); c.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v", c)
	}
	var b v1alpha1.LoadBalancerBinding
	_ = e.c.Get(context.Background(), types.NamespacedName{Namespace: ct.Namespace, Name: "b"}, &b)
	if b.Status.Targets.Healthy != 4 {
		t.Errorf("status.targets = %+v, want 4 healthy (two pods in two groups)", b.Status.Targets)
	}
}

// TestAWSDrainWaitsForEveryGroup: a deleted pod is deregistered from both
// of its binding's target groups at once, and is drained only once the
// group with the longer deregistration delay has let go too.
func TestAWSDrainWaitsForEveryGroup(t *testing.T) {
	e := newAWSEnv(t, "")
	short := e.group("short", "/healthz", 10*time.Second, nil) // drains for 200ms at 50×
	long := e.group("long", "/healthz", 90*time.Second, nil)   // 1.8s
	e.pod("p1", "127.0.0.2")
	e.pod("p2", "127.0.0.3")
	if err := e.c.Create(context.Background(), awsBinding("b", short, long)); err != nil {
		t.Fatal(err)
	}
	e.until("b", "both pods healthy", e.gates("p1", "p2"))
	e.deletePod("p1")

	sawHalf := false
	e.until("b", "p1 drained", func() bool {
		s, l := e.state("b", short, "127.0.0.2"), e.state("b", long, "127.0.0.2")
		drained := e.podCond("p1", v1alpha1.PodConditionDrained)
		if s == "" && l == lb.Draining {
			sawHalf = true
			if drained != "" {
				t.Fatalf("p1 drained (%s) while the long group still drains it", drained)
			}
		}
		if drained != "" && (s != "" || l != "") {
			t.Fatalf("p1 drained (%s) while listed: short=%q long=%q", drained, s, l)
		}
		return drained == "True/Deregistered"
	})
	if !sawHalf {
		t.Error("never saw p1 gone from the short group while draining in the long one")
	}
	for _, arn := range []string{short, long} {
		if got, want := e.held(arn), e.want("healthy", "127.0.0.3"); !slices.Equal(got, want) {
			t.Errorf("%s holds %v, want %v", arnName(arn), got, want)
		}
	}
	if n := e.rec.Count("Pod ingress/p1", "Deregistered"); n != 2 {
		t.Errorf("Deregistered events on p1 = %d, want one per group", n)
	}
	if e.podCond("p2", v1alpha1.PodConditionDrained) != "" || !e.gates("p2")() {
		t.Error("p2 disturbed")
	}

	// Deleting the binding deregisters the rest from both groups, then
	// lets the binding go.
	var b v1alpha1.LoadBalancerBinding
	_ = e.c.Get(context.Background(), types.NamespacedName{Namespace: ct.Namespace, Name: "b"}, &b)
	confirm(t, e.c, &b) // p2 still runs
	if err := e.c.Delete(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	e.until("b", "the binding gone", func() bool {
		err := e.c.Get(context.Background(), types.NamespacedName{Namespace: ct.Namespace, Name: "b"}, &b)
		return apierrors.IsNotFound(err)
	})
	for _, arn := range []string{short, long} {
		if got := e.held(arn); len(got) != 0 {
			t.Errorf("%s still holds %v", arnName(arn), got)
		}
	}
}

// TestAWSThrottlingConverges: with half of all API calls throttled, a
// scale-up and a replacement of half the pods across two target groups end
// with each group holding exactly the live pods, each once, every new gate
// open and every deleted pod drained.
func TestAWSThrottlingConverges(t *testing.T) {
	e := newAWSEnv(t, "")
	a := e.group("a", "/healthz", 10*time.Second, nil)
	b := e.group("b", "/healthz", 20*time.Second, nil)
	e.f.SetFaults(awsfake.Faults{Throttle: 0.5})
	for i := 2; i <= 5; i++ {
		e.pod(fmt.Sprintf("p%d", i), fmt.Sprintf("127.0.0.%d", i))
	}
	if err := e.c.Create(context.Background(), awsBinding("b", a, b)); err != nil {
		t.Fatal(err)
	}
	e.until("b", "four pods healthy", e.gates("p2", "p3", "p4", "p5"))
	for _, arn := range []string{a, b} {
		if got, want := e.held(arn), e.want("healthy", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"); !slices.Equal(got, want) {
			t.Fatalf("%s holds %v, want %v", arnName(arn), got, want)
		}
	}
	// Replace p2 and p3 by p6 and p7, and add p8.
	e.deletePod("p2")
	e.deletePod("p3")
	for i := 6; i <= 8; i++ {
		e.pod(fmt.Sprintf("p%d", i), fmt.Sprintf("127.0.0.%d", i))
	}
	live := []string{"127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7", "127.0.0.8"}
	e.until("b", "new pods healthy, old ones drained", func() bool {
		if !e.gates("p6", "p7", "p8")() {
			return false
		}
		for _, p := range []string{"p2", "p3"} {
			if e.podCond(p, v1alpha1.PodConditionDrained) != "True/Deregistered" {
				return false
			}
		}
		return slices.Equal(e.held(a), e.want("healthy", live...)) && slices.Equal(e.held(b), e.want("healthy", live...))
	})
	if len(e.errs) > 0 {
		t.Errorf("reconcile errors under throttling (the provider retries): %v", e.errs)
	}
	if c := e.bindingCond("b", v1alpha1.ConditionProviderReachable); c.Status != metav1.ConditionTrue {
		t.Errorf("ProviderReachable = %+v", c)
	}
	throttled := 0
	mfs, _ := e.reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == "Throttling" {
					throttled += int(m.GetCounter().GetValue())
				}
			}
		}
	}
	if throttled == 0 {
		t.Errorf("no call throttled (fake saw %v)", e.f.Calls())
	}
	t.Logf("%d throttled API calls; fake saw %v", throttled, e.f.Calls())
}

// TestAWSProviderErrors: a failing or missing target group turns
// ProviderReachable False with the provider's error, and the reconcile
// returns it (so the controller retries with backoff); recovery turns it
// True again.
func TestAWSProviderErrors(t *testing.T) {
	t.Run("API failing", func(t *testing.T) {
		e := newAWSEnv(t, "")
		a := e.group("a", "/healthz", 10*time.Second, nil)
		e.pod("p1", "127.0.0.2")
		if err := e.c.Create(context.Background(), awsBinding("b", a)); err != nil {
			t.Fatal(err)
		}
		e.f.SetFaults(awsfake.Faults{ServerError: 1})
		e.round("b")
		if len(e.errs) != 1 || !errors.Is(e.errs[0], lb.ErrUnreachable) {
			t.Fatalf("reconcile errors %v, want one lb.ErrUnreachable", e.errs)
		}
		c := e.bindingCond("b", v1alpha1.ConditionProviderReachable)
		if c.Status != metav1.ConditionFalse || c.Reason != "ProviderUnreachable" || !strings.Contains(c.Message, "InternalFailure") {
			t.Errorf("ProviderReachable = %+v", c)
		}
		if e.rec.Count("LoadBalancerBinding ingress/b", "ProviderError") != 1 {
			t.Error("no ProviderError event")
		}
		if got := e.podCond("p1", v1alpha1.ReadinessGateHealthy); got != "False/Pending" {
			t.Errorf("gate while the provider never answered: %q", got)
		}
		e.f.SetFaults(awsfake.Faults{})
		e.errs = nil
		e.until("b", "p1 healthy", e.gates("p1"))
		if c := e.bindingCond("b", v1alpha1.ConditionProviderReachable); c.Status != metav1.ConditionTrue {
			t.Errorf("after recovery ProviderReachable = %+v", c)
		}
	})
	t.Run("one of two groups missing", func(t *testing.T) {
		e := newAWSEnv(t, "")
		a := e.group("a", "/healthz", 10*time.Second, nil)
		missing := strings.Replace(a, "targetgroup/a/", "targetgroup/gone/", 1)
		e.pod("p1", "127.0.0.2")
		if err := e.c.Create(context.Background(), awsBinding("b", a, missing)); err != nil {
			t.Fatal(err)
		}
		for range 20 {
			e.round("b")
			time.Sleep(20 * time.Millisecond)
		}
		if len(e.errs) == 0 || !errors.Is(e.errs[len(e.errs)-1], lb.ErrGroupNotFound) {
			t.Fatalf("reconcile errors %v, want lb.ErrGroupNotFound", e.errs)
		}
		if c := e.bindingCond("b", v1alpha1.ConditionProviderReachable); c.Status != metav1.ConditionFalse || c.Reason != "GroupNotFound" {
			t.Errorf("ProviderReachable = %+v", c)
		}
		// The existing group is still served, but the gate stays closed:
		// the pod is not (known to be) in every group.
		if got, want := e.held(a), e.want("healthy", "127.0.0.2"); !slices.Equal(got, want) {
			t.Errorf("existing group holds %v, want %v", got, want)
		}
		if got := e.podCond("p1", v1alpha1.ReadinessGateHealthy); got == "True/TargetHealthy" {
			t.Errorf("gate open with a group missing: %q", got)
		}
	})
}

// TestAWSDeregistrationDelayTooLong: a target group that drains for longer
// than the pods' grace period leaves room for gets a Warning Event, at
// most once per CheckInterval (5m), and again at once when the grace
// period changes.
func TestAWSDeregistrationDelayTooLong(t *testing.T) {
	e := newAWSEnv(t, "")
	slow := e.group("slow", "/healthz", 300*time.Second, nil) // AWS's default delay
	fine := e.group("fine", "/healthz", 10*time.Second, nil)
	e.pod("p1", "127.0.0.2") // default grace: 30s
	if err := e.c.Create(context.Background(), awsBinding("b", slow, fine)); err != nil {
		t.Fatal(err)
	}
	warnings := func() []string {
		var out []string
		for _, ev := range e.rec.Events() {
			if ev.Reason == "DeregistrationDelayTooLong" {
				out = append(out, ev.Note)
			}
		}
		return out
	}
	e.round("b")
	w := warnings()
	if len(w) != 1 || !strings.Contains(w[0], slow) || !strings.Contains(w[0], "5m0s") {
		t.Fatalf("warnings %q, want one about the slow group", w)
	}
	calls := e.f.Calls()["DescribeTargetGroupAttributes"]
	for range 3 {
		e.clock.Advance(time.Minute)
		e.round("b")
	}
	if n := len(warnings()); n != 1 {
		t.Errorf("%d warnings within 5m, want 1", n)
	}
	if got := e.f.Calls()["DescribeTargetGroupAttributes"]; got != calls {
		t.Errorf("delay read %d more times within the interval", got-calls)
	}
	e.clock.Advance(2 * time.Minute)
	e.round("b")
	if n := len(warnings()); n != 2 {
		t.Errorf("%d warnings after 5m, want 2", n)
	}
	// A pod with a long enough grace period does not silence the check:
	// the shortest grace counts. Raising every pod's grace does.
	long := int64(400)
	var p corev1.Pod
	_ = e.c.Get(context.Background(), types.NamespacedName{Namespace: ct.Namespace, Name: "p1"}, &p)
	p.Spec.TerminationGracePeriodSeconds = &long
	if err := e.c.Update(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	e.round("b")
	if n := len(warnings()); n != 2 {
		t.Errorf("%d warnings after raising the grace period to %ds, want still 2", n, long)
	}
	if got := e.f.Calls()["DescribeTargetGroupAttributes"]; got <= calls+2 {
		t.Errorf("changed grace period not checked at once (%d reads)", got-calls)
	}
}

// TestAWSDiscoveredGroups: a binding without ARNs uses the target groups
// tagged for the controller's cluster and the binding's name.
func TestAWSDiscoveredGroups(t *testing.T) {
	e := newAWSEnv(t, "prod")
	tags := map[string]string{aws.ClusterTag: "prod", aws.FrontendTag: "web"}
	a := e.group("web-a", "/healthz", 10*time.Second, tags)
	b := e.group("web-b", "/healthz", 10*time.Second, tags)
	other := e.group("api", "/healthz", 10*time.Second, map[string]string{aws.ClusterTag: "prod", aws.FrontendTag: "api"})
	e.pod("p1", "127.0.0.2")
	web := awsBinding("web")
	web.Spec.Provider.AWS.Region = "us-east-1"
	if err := e.c.Create(context.Background(), web); err != nil {
		t.Fatal(err)
	}
	e.until("web", "p1 healthy", e.gates("p1"))
	for _, arn := range []string{a, b} {
		if got, want := e.held(arn), e.want("healthy", "127.0.0.2"); !slices.Equal(got, want) {
			t.Errorf("%s holds %v, want %v", arnName(arn), got, want)
		}
	}
	if got := e.held(other); len(got) != 0 {
		t.Errorf("untagged group touched: %v", got)
	}
}

// TestAWSDiscoveredGroupConflict: a tenant's binding named like the
// platform's discovers the platform's target groups by tag; the run-time
// conflict check refuses it (GroupConflict) and it never registers nor
// deregisters anything, even though it selects no pod (acting, it would
// deregister the platform's target).
func TestAWSDiscoveredGroupConflict(t *testing.T) {
	e := newAWSEnv(t, "prod")
	tg := e.group("web", "/healthz", 10*time.Second, map[string]string{aws.ClusterTag: "prod", aws.FrontendTag: "web"})
	e.pod("p1", "127.0.0.2")
	platform := awsBinding("web")
	platform.Spec.Provider.AWS.Region = "us-east-1"
	if err := e.c.Create(context.Background(), platform); err != nil {
		t.Fatal(err)
	}
	e.until("web", "p1 healthy", e.gates("p1"))
	tenant := awsBinding("web")
	tenant.Namespace = "tenant" // created later, and "tenant" > "ingress" at equal times
	tenant.Spec.Provider.AWS.Region = "us-east-1"
	if err := e.c.Create(context.Background(), tenant); err != nil {
		t.Fatal(err)
	}
	calls := e.f.Calls()
	key := types.NamespacedName{Namespace: "tenant", Name: "web"}
	for range 3 {
		if _, err := e.br.Reconcile(context.Background(), reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}
	after := e.f.Calls()
	for _, op := range []string{"RegisterTargets", "DeregisterTargets"} {
		if after[op] != calls[op] {
			t.Errorf("%s calls %d → %d while only the tenant's binding was reconciled", op, calls[op], after[op])
		}
	}
	if got, want := e.held(tg), e.want("healthy", "127.0.0.2"); !slices.Equal(got, want) {
		t.Errorf("the platform's group holds %v, want %v", got, want)
	}
	var b v1alpha1.LoadBalancerBinding
	if err := e.c.Get(context.Background(), key, &b); err != nil {
		t.Fatal(err)
	}
	if c := condition(&b, v1alpha1.ConditionReady); c.Reason != binding.ReasonGroupConflict || !strings.Contains(c.Message, "ingress/web") {
		t.Errorf("tenant Ready = %s/%s %q, want %s naming ingress/web", c.Status, c.Reason, c.Message, binding.ReasonGroupConflict)
	}
	if n := e.rec.Count("LoadBalancerBinding tenant/web", binding.ReasonGroupConflict); n != 1 {
		t.Errorf("%d %s Events on the tenant's binding, want 1", n, binding.ReasonGroupConflict)
	}
	// The platform's binding is not refused by the newer one.
	e.round("web")
	if c := e.bindingCond("web", v1alpha1.ConditionReady); c.Reason == binding.ReasonGroupConflict {
		t.Errorf("platform refused: %+v", c)
	}
}

// TestAWSHealthCheckPortMismatch: a binding's healthCheckPort is compared
// with each target group's HealthCheckPort; a group checking another port
// gets a Warning Event, a matching one none.
func TestAWSHealthCheckPortMismatch(t *testing.T) {
	e := newAWSEnv(t, "")
	match, err := e.f.AddTargetGroup(awsfake.TargetGroup{Name: "match", Port: e.port, HealthCheckPort: "10254",
		HealthCheckInterval: 5 * time.Second, HealthyThreshold: 2, UnhealthyThreshold: 2, DeregistrationDelay: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	other := e.group("other", "/healthz", 10*time.Second, nil) // traffic-port
	e.pod("p1", "127.0.0.2")
	b := awsBinding("b", match, other)
	port := int32(10254)
	b.Spec.HealthCheckPort = &port
	if err := e.c.Create(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	e.round("b")
	var w []string
	for _, ev := range e.rec.Events() {
		if ev.Reason == "HealthCheckPortMismatch" {
			w = append(w, ev.Note)
		}
	}
	if len(w) != 1 || !strings.Contains(w[0], other) || !strings.Contains(w[0], `"traffic-port"`) || strings.Contains(w[0], match) {
		t.Fatalf("warnings %q, want one about %s", w, other)
	}
}

func TestHealthCheckPortProblem(t *testing.T) {
	port := int32(10254)
	with := &v1alpha1.LoadBalancerBinding{Spec: v1alpha1.LoadBalancerBindingSpec{HealthCheckPort: &port}}
	without := &v1alpha1.LoadBalancerBinding{}
	for _, tc := range []struct {
		b    *v1alpha1.LoadBalancerBinding
		got  string
		warn bool
	}{
		{with, "10254", false},
		{with, "traffic-port", true},
		{with, "8080", true},
		{with, "", true},
		{without, "traffic-port", false},
		{without, "8080", false},
	} {
		if msg := binding.HealthCheckPortProblem(tc.b, "tg", tc.got); (msg != "") != tc.warn {
			t.Errorf("port %v, group %q: %q, want warning %v", tc.b.Spec.HealthCheckPort, tc.got, msg, tc.warn)
		}
	}
}
