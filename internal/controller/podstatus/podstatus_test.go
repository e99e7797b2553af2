package podstatus_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/binding"
	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/controller/podstatus"
	state "sluice.dev/sluice/internal/controller/snapshot"
	"sluice.dev/sluice/internal/lb"
	lbfake "sluice.dev/sluice/internal/lb/fake"
)

// env runs the binding and pod-status reconcilers by hand against a fake
// client and a fake provider, as the manager would on events.
type env struct {
	t     *testing.T
	c     client.WithWatch
	p     *lbfake.Provider
	rec   *ct.Recorder
	clock *ct.Clock
	reg   *prometheus.Registry
	br    *binding.Reconciler
	pr    *podstatus.Reconciler
}

func newEnv(t *testing.T, objs ...client.Object) *env {
	t.Helper()
	return newEnvWith(t, ct.NewProvider(), objs...)
}

func newEnvWith(t *testing.T, p *lbfake.Provider, objs ...client.Object) *env {
	t.Helper()
	e := &env{t: t, c: ct.NewClient(interceptor.Funcs{}, objs...), p: p, rec: &ct.Recorder{}, clock: ct.NewClock(), reg: prometheus.NewRegistry()}
	store, timeline := state.NewStore(), state.NewTimeline()
	now := func() time.Time { return e.clock.Now() } // tests may replace the clock
	var err error
	e.br, err = binding.New(binding.Options{Client: e.c, Providers: ct.Providers{P: e.p}, Store: store, Timeline: timeline, Recorder: e.rec, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	e.pr, err = podstatus.New(podstatus.Options{Client: e.c, Store: store, Timeline: timeline, Recorder: e.rec, Registerer: e.reg, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func req(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ct.Namespace, Name: name}}
}

// bindings reconciles the named bindings (provider errors are the test's
// business, so they are returned, not fatal).
func (e *env) bindings(names ...string) {
	e.t.Helper()
	for _, n := range names {
		if _, err := e.br.Reconcile(context.Background(), req(n)); err != nil {
			e.t.Fatalf("binding %s: %v", n, err)
		}
	}
}

func (e *env) pod(name string) (*corev1.Pod, reconcile.Result) {
	e.t.Helper()
	res, err := e.pr.Reconcile(context.Background(), req(name))
	if err != nil {
		e.t.Fatalf("pod %s: %v", name, err)
	}
	var p corev1.Pod
	if err := e.c.Get(context.Background(), req(name).NamespacedName, &p); err != nil {
		e.t.Fatal(err)
	}
	return &p, res
}

func cond(p *corev1.Pod, typ corev1.PodConditionType) string {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return string(c.Status) + "/" + c.Reason
		}
	}
	return ""
}

func histCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}

// TestGateHealthyInAllBindings walks one pod through two bindings: the gate
// turns True only once both load balancers check it healthy, and the
// kubelet's conditions survive every patch.
func TestGateHealthyInAllBindings(t *testing.T) {
	e := newEnv(t,
		ct.Pod("p1", "10.244.1.5", ct.WithCondition(corev1.PodReady, corev1.ConditionFalse), ct.WithCondition(corev1.ContainersReady, corev1.ConditionTrue)),
		ct.Binding("a"), ct.Binding("b", ct.Group("be2")))
	p, res := e.pod("p1")
	if got := cond(p, v1alpha1.ReadinessGateHealthy); got != "False/Pending" {
		t.Fatalf("before any binding synced: %q", got)
	}
	if res.RequeueAfter == 0 {
		t.Error("no recheck while pending")
	}
	steps := []struct {
		name  string
		do    func()
		want  string
		event int // Healthy events so far
	}{
		{"registered, initial in both", func() { e.bindings("a", "b") }, "False/TargetNotHealthy", 0},
		{"healthy in a, unhealthy in b", func() {
			e.p.SetHealth("be2", ct.Target("10.244.1.5"), lb.Unhealthy, "L7STS 503")
			e.p.Step()
			e.bindings("a", "b")
		}, "False/TargetNotHealthy", 0},
		{"healthy in both", func() {
			e.p.SetHealth("be2", ct.Target("10.244.1.5"), lb.Healthy, "")
			e.p.Step()
			e.bindings("a", "b")
		}, "True/TargetHealthy", 1},
		{"unhealthy again in a", func() {
			e.p.SetHealth(ct.Backend, ct.Target("10.244.1.5"), lb.Unhealthy, "L4CON")
			e.p.Step()
			e.bindings("a")
		}, "False/TargetNotHealthy", 1},
	}
	for _, s := range steps {
		s.do()
		e.clock.Advance(time.Second)
		p, _ := e.pod("p1")
		if got := cond(p, v1alpha1.ReadinessGateHealthy); got != s.want {
			t.Fatalf("%s: gate %q, want %q", s.name, got, s.want)
		}
		if got := cond(p, corev1.PodReady); got != "False/Kubelet" {
			t.Fatalf("%s: kubelet's Ready condition became %q", s.name, got)
		}
		if got := cond(p, corev1.ContainersReady); got != "True/Kubelet" {
			t.Fatalf("%s: kubelet's ContainersReady condition became %q", s.name, got)
		}
		if n := e.rec.Count("Pod ingress/p1", "Healthy"); n != s.event {
			t.Fatalf("%s: %d Healthy events, want %d", s.name, n, s.event)
		}
	}
	if n := histCount(t, e.reg, "sluice_controller_healthy_latency_seconds"); n != 1 {
		t.Errorf("healthy latency observations = %d, want 1", n)
	}
}

// TestDrainedAfterProviderLetsGo: the drained condition appears only once
// every binding's provider has stopped listing the deleted pod's target.
func TestDrainedAfterProviderLetsGo(t *testing.T) {
	for _, keepUnused := range []bool{false, true} {
		t.Run(map[bool]string{false: "haproxy-like (target vanishes)", true: "aws-like (target unused)"}[keepUnused], func(t *testing.T) {
			e := newEnvWith(t, lbfake.New(lbfake.Options{Groups: []string{ct.Backend, "be2"}, KeepUnused: keepUnused}),
				ct.Pod("p1", "10.244.1.5", func(p *corev1.Pod) { p.Finalizers = []string{"test/hold"} }),
				ct.Pod("p2", "10.244.1.6"), ct.Binding("a"), ct.Binding("b", ct.Group("be2")))
			e.bindings("a", "b")
			e.p.Step()
			e.bindings("a", "b")
			if p, _ := e.pod("p1"); cond(p, v1alpha1.ReadinessGateHealthy) != "True/TargetHealthy" {
				t.Fatalf("gate before deletion: %q", cond(p, v1alpha1.ReadinessGateHealthy))
			}
			e.p.SetConnections(ct.Backend, ct.Target("10.244.1.5"), 3) // long requests keep a draining

			var p1 corev1.Pod
			if err := e.c.Get(context.Background(), req("p1").NamespacedName, &p1); err != nil {
				t.Fatal(err)
			}
			if err := e.c.Delete(context.Background(), &p1); err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				name string
				do   func()
				want string
			}{
				{"deleted, no binding has looked yet", func() {}, ""},
				{"deregistered, draining in both", func() { e.bindings("a", "b") }, ""},
				{"gone from b, a still has connections", func() { e.p.Step(); e.bindings("a", "b") }, ""},
				{"a drained too", func() {
					e.p.SetConnections(ct.Backend, ct.Target("10.244.1.5"), 0)
					e.p.Step()
					e.bindings("a", "b")
				}, "True/Deregistered"},
			}
			for _, s := range steps {
				s.do()
				e.clock.Advance(time.Second)
				p, res := e.pod("p1")
				if got := cond(p, v1alpha1.PodConditionDrained); got != s.want {
					t.Fatalf("%s: drained %q, want %q (targets a=%v b=%v)", s.name, got, s.want, ct.States(e.p, ct.Backend), ct.States(e.p, "be2"))
				}
				if s.want == "" && res.RequeueAfter == 0 {
					t.Fatalf("%s: no recheck while waiting", s.name)
				}
			}
			if n := e.rec.Count("Pod ingress/p1", "Drained"); n != 1 {
				t.Errorf("Drained events = %d", n)
			}
			if n := e.rec.Count("Pod ingress/p1", "Deregistered"); n != 2 {
				t.Errorf("Deregistered events = %d, want one per binding", n)
			}
			if n := histCount(t, e.reg, "sluice_controller_drain_latency_seconds"); n != 1 {
				t.Errorf("drain latency observations = %d", n)
			}
			// p2 is untouched.
			if p, _ := e.pod("p2"); cond(p, v1alpha1.ReadinessGateHealthy) != "True/TargetHealthy" || cond(p, v1alpha1.PodConditionDrained) != "" {
				t.Errorf("p2 conditions: %+v", p.Status.Conditions)
			}
		})
	}
}

func TestDrainTimeout(t *testing.T) {
	timeout := func(b *v1alpha1.LoadBalancerBinding) {
		b.Spec.Drain.Timeout = &metav1.Duration{Duration: 30 * time.Second}
	}
	e := newEnv(t, ct.Pod("p1", "10.244.1.5", func(p *corev1.Pod) { p.Finalizers = []string{"test/hold"} }), ct.Binding("a", timeout))
	e.bindings("a")
	e.p.Step()
	e.p.SetConnections(ct.Backend, ct.Target("10.244.1.5"), 1) // never drains
	var p1 corev1.Pod
	if err := e.c.Get(context.Background(), req("p1").NamespacedName, &p1); err != nil {
		t.Fatal(err)
	}
	// The fake client stamps deletionTimestamp with the wall clock; line
	// the test clock up with it.
	if err := e.c.Delete(context.Background(), &p1); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Get(context.Background(), req("p1").NamespacedName, &p1); err != nil {
		t.Fatal(err)
	}
	e.clock = ct.NewClock()
	e.clock.Advance(p1.DeletionTimestamp.Sub(e.clock.Now()))
	for i := 0; i < 29; i += 5 {
		e.bindings("a")
		e.p.Step()
		p, _ := e.pod("p1")
		if got := cond(p, v1alpha1.PodConditionDrained); got != "" {
			t.Fatalf("after %ds: drained %q before the timeout", i, got)
		}
		e.clock.Advance(5 * time.Second)
	}
	e.clock.Advance(time.Second)
	if p, _ := e.pod("p1"); cond(p, v1alpha1.PodConditionDrained) != "True/Timeout" {
		t.Fatalf("after the timeout: %q", cond(p, v1alpha1.PodConditionDrained))
	}
}

func TestHandshakeAndGateOff(t *testing.T) {
	e := newEnv(t, ct.Pod("p1", "10.244.1.5", ct.NoGate(), func(p *corev1.Pod) { p.Finalizers = []string{"test/hold"} }), ct.Binding("a", ct.Off))
	e.bindings("a")
	e.p.Step()
	e.bindings("a")
	if p, _ := e.pod("p1"); len(p.Status.Conditions) != 0 {
		t.Fatalf("conditions on a pod without gate: %+v", p.Status.Conditions)
	}
	var p1 corev1.Pod
	_ = e.c.Get(context.Background(), req("p1").NamespacedName, &p1)
	if err := e.c.Delete(context.Background(), &p1); err != nil {
		t.Fatal(err)
	}
	e.bindings("a")
	e.p.Step()
	e.bindings("a")
	if p, _ := e.pod("p1"); cond(p, v1alpha1.PodConditionDrained) != "" {
		t.Fatalf("drained set with the handshake off: %+v", p.Status.Conditions)
	}
	if got := ct.States(e.p, ct.Backend); len(got) != 0 {
		t.Errorf("target still listed: %v", got)
	}
}

func TestMetricsRegistered(t *testing.T) {
	e := newEnv(t)
	if n, err := testutil.GatherAndCount(e.reg); err != nil || n != 0 {
		// Histograms without observations are still described.
		t.Logf("gathered %d (%v)", n, err)
	}
	if _, err := podstatus.New(podstatus.Options{Client: e.c, Store: state.NewStore(), Registerer: e.reg}); err == nil {
		t.Error("registering the same metrics twice did not fail")
	}
}
