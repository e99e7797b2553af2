package binding_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/binding"
	ct "sluice.dev/sluice/internal/controller/controllertest"
	state "sluice.dev/sluice/internal/controller/snapshot"
	"sluice.dev/sluice/internal/lb"
	lbfake "sluice.dev/sluice/internal/lb/fake"
)

type env struct {
	t        *testing.T
	c        client.WithWatch
	p        *lbfake.Provider
	store    *state.Store
	rec      *ct.Recorder
	clock    *ct.Clock
	reg      *prometheus.Registry
	r        *binding.Reconciler
	notified map[types.NamespacedName]int
	patches  [][]byte // status patches sent for bindings
	access   binding.Access
	// readOnly makes every write to a binding (status or finalizer) fail
	// with 403, as RBAC answers outside the binding namespaces; it counts
	// them in refused.
	readOnly bool
	refused  int
	podLists int // pod lists read through the client
}

func newEnv(t *testing.T, objs ...client.Object) *env {
	t.Helper()
	e := &env{t: t, p: ct.NewProvider(), clock: ct.NewClock()}
	forbidden := func(obj client.Object) error {
		if _, ok := obj.(*v1alpha1.LoadBalancerBinding); ok && e.readOnly {
			e.refused++
			return apierrors.NewForbidden(schema.GroupResource{Group: "sluice.dev", Resource: "loadbalancerbindings"}, obj.GetName(), errors.New("RBAC"))
		}
		return nil
	}
	e.c = ct.NewClient(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, o ...client.SubResourcePatchOption) error {
		if err := forbidden(obj); err != nil {
			return err
		}
		if data, err := p.Data(obj); err == nil {
			e.patches = append(e.patches, data)
		}
		return c.SubResource(sub).Patch(ctx, obj, p, o...)
	}, List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, o ...client.ListOption) error {
		if _, ok := list.(*corev1.PodList); ok {
			e.podLists++
		}
		return c.List(ctx, list, o...)
	}, Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, o ...client.PatchOption) error {
		if err := forbidden(obj); err != nil {
			return err
		}
		return c.Patch(ctx, obj, p, o...)
	}}, objs...)
	e.restart()
	return e
}

// restart replaces the reconciler and everything in memory, as a new
// controller process would; the provider and the API objects stay.
func (e *env) restart() {
	e.t.Helper()
	e.store, e.rec, e.reg = state.NewStore(), &ct.Recorder{}, prometheus.NewRegistry()
	e.notified = map[types.NamespacedName]int{}
	r, err := binding.New(binding.Options{
		Client: e.c, Providers: ct.Providers{P: e.p}, Store: e.store, Recorder: e.rec, Registerer: e.reg, Now: e.clock.Now,
		Access: e.access,
		Notify: func(_ context.Context, pods []types.NamespacedName) {
			for _, p := range pods {
				e.notified[p]++
			}
		},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.r = r
}

func (e *env) reconcile(name string) (reconcile.Result, error) {
	return e.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ct.Namespace, Name: name}})
}

func (e *env) mustReconcile(name string) reconcile.Result {
	e.t.Helper()
	res, err := e.reconcile(name)
	if err != nil {
		e.t.Fatalf("reconcile %s: %v", name, err)
	}
	return res
}

// checkStatusPatches: every status write carries every target count, which
// the CRD requires (a diff-based merge patch would drop unchanged zeros).
func (e *env) checkStatusPatches() {
	e.t.Helper()
	if len(e.patches) == 0 {
		e.t.Fatal("no status written")
	}
	for _, data := range e.patches {
		var p struct {
			Status struct {
				Targets map[string]*int `json:"targets"`
			} `json:"status"`
		}
		if err := json.Unmarshal(data, &p); err != nil {
			e.t.Fatal(err)
		}
		for _, k := range []string{"initial", "healthy", "unhealthy", "draining", "unavailable"} {
			if p.Status.Targets[k] == nil {
				e.t.Errorf("status patch %s lacks targets.%s", data, k)
			}
		}
	}
}

func (e *env) binding(name string) *v1alpha1.LoadBalancerBinding {
	e.t.Helper()
	var b v1alpha1.LoadBalancerBinding
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: ct.Namespace, Name: name}, &b); err != nil {
		e.t.Fatal(err)
	}
	return &b
}

func (e *env) update(obj client.Object) {
	e.t.Helper()
	if err := e.c.Update(context.Background(), obj); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) calls(op lbfake.Op) int {
	n := 0
	for _, c := range e.p.Calls() {
		if c.Op == op {
			n++
		}
	}
	return n
}

func (e *env) states() []string { return ct.States(e.p, ct.Backend) }

func condition(b *v1alpha1.LoadBalancerBinding, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(b.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func TestRegisterBeforeReady(t *testing.T) {
	now := ct.NewClock().Now()
	cases := []struct {
		name string
		objs []client.Object
		want []string
	}{
		{"pod with an IP, not ready", []client.Object{ct.Pod("p1", "10.244.1.5", ct.WithCondition(corev1.PodReady, corev1.ConditionFalse))},
			[]string{"10.244.1.5:8080=initial"}},
		{"pod without an IP", []client.Object{ct.Pod("p1", "")}, []string{}},
		{"other labels", []client.Object{ct.Pod("p1", "10.244.1.5", ct.Labels(map[string]string{"app": "web"}))}, []string{}},
		{"deleting pod", []client.Object{ct.Pod("p1", "10.244.1.5", ct.Deleting(now))}, []string{}},
		{"node leaving the load balancer", []client.Object{ct.Pod("p1", "10.244.1.5", ct.OnNode("node-x")), ct.Node("node-x", "zone-a", ct.Excluded)}, []string{}},
		{"cordoned node keeps its targets", []client.Object{ct.Pod("p1", "10.244.1.5", ct.OnNode("node-c")),
			ct.Node("node-c", "zone-a", func(n *corev1.Node) { n.Spec.Unschedulable = true })}, []string{"10.244.1.5:8080=initial"}},
		{"three pods, two zones", []client.Object{ct.Pod("p1", "10.244.1.5"), ct.Pod("p2", "10.244.2.5", ct.OnNode("node-2")),
			ct.Pod("p3", "10.244.1.6"), ct.Node("node-1", "zone-a"), ct.Node("node-2", "zone-b")},
			[]string{"10.244.1.5:8080=initial", "10.244.1.6:8080=initial", "10.244.2.5:8080=initial"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, append(tc.objs, ct.Binding("b"))...)
			res := e.mustReconcile("b")
			if got := e.states(); !slices.Equal(got, tc.want) {
				t.Fatalf("targets = %v, want %v", got, tc.want)
			}
			if n := e.rec.Count("Pod ingress/p1", "Registered"); n != min(len(tc.want), 1) {
				t.Errorf("Registered events on p1 = %d", n)
			}
			wantRequeue := 10 * time.Second
			if len(tc.want) > 0 {
				wantRequeue = time.Second // initial targets: poll fast
			}
			if res.RequeueAfter != wantRequeue {
				t.Errorf("requeue after %v, want %v", res.RequeueAfter, wantRequeue)
			}
			b := e.binding("b")
			if c := condition(b, v1alpha1.ConditionReady); c.Status != metav1.ConditionTrue {
				t.Errorf("Ready = %+v", c)
			}
			if int(b.Status.Targets.Initial) != len(tc.want) || b.Status.ObservedGeneration != 1 {
				t.Errorf("status = %+v", b.Status)
			}
			if got := testutil.ToFloat64(mustGauge(t, e.reg, "initial")); int(got) != len(tc.want) {
				t.Errorf("sluice_controller_targets{state=initial} = %v", got)
			}
			e.checkStatusPatches()
			// A second round changes nothing and registers nothing again.
			before := e.calls(lbfake.OpRegister)
			e.mustReconcile("b")
			if after := e.calls(lbfake.OpRegister); after != before {
				t.Errorf("second reconcile registered again (%d → %d calls)", before, after)
			}
		})
	}
}

func mustGauge(t *testing.T, reg *prometheus.Registry, st string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_controller_targets" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "state" && l.GetValue() == st {
					return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, func() float64 { return m.GetGauge().GetValue() })
				}
			}
		}
	}
	t.Fatalf("no sluice_controller_targets{state=%q}", st)
	return nil
}

func TestDeregister(t *testing.T) {
	cases := []struct {
		name   string
		change func(e *env)
		event  bool // a Deregistered Event on the pod
	}{
		{"pod deleted (deletionTimestamp)", func(e *env) {
			if err := e.c.Delete(context.Background(), ct.Pod("p1", "")); err != nil {
				e.t.Fatal(err)
			}
		}, true},
		{"pod gone", func(e *env) {
			p := ct.Pod("p1", "")
			var cur corev1.Pod
			if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(p), &cur); err != nil {
				e.t.Fatal(err)
			}
			cur.Finalizers = nil
			e.update(&cur)
			if err := e.c.Delete(context.Background(), &cur); err != nil && !apierrors.IsNotFound(err) {
				e.t.Fatal(err)
			}
		}, false},
		{"node marked for removal", func(e *env) {
			n := ct.Node("node-1", "zone-a", func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "ToBeDeletedByClusterAutoscaler", Effect: corev1.TaintEffectNoSchedule}}
			})
			var cur corev1.Node
			if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(n), &cur); err != nil {
				e.t.Fatal(err)
			}
			cur.Spec.Taints = n.Spec.Taints
			e.update(&cur)
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hold := func(p *corev1.Pod) { p.Finalizers = []string{"test/hold"} }
			e := newEnv(t, ct.Pod("p1", "10.244.1.5", hold), ct.Pod("p2", "10.244.1.6"), ct.Node("node-2", "zone-b"), ct.Node("node-1", "zone-a"), ct.Binding("b"))
			e.mustReconcile("b")
			e.p.Step()
			e.mustReconcile("b")
			if got := e.states(); !slices.Equal(got, []string{"10.244.1.5:8080=healthy", "10.244.1.6:8080=healthy"}) {
				t.Fatalf("before: %v", got)
			}
			tc.change(e)
			res := e.mustReconcile("b")
			got := e.states()
			if !slices.Contains(got, "10.244.1.5:8080=draining") {
				t.Fatalf("after change: %v, want p1 draining", got)
			}
			if res.RequeueAfter != time.Second {
				t.Errorf("requeue %v while draining, want fast", res.RequeueAfter)
			}
			if n := e.rec.Count("Pod ingress/p1", "Deregistered"); (n == 1) != tc.event {
				t.Errorf("Deregistered events on p1 = %d, want event %v", n, tc.event)
			}
			snap := e.store.Get(types.NamespacedName{Namespace: ct.Namespace, Name: "b"})
			if st, ok := snap.Group(ct.Backend).Status(ct.Target("10.244.1.5")); !ok || st.State != lb.Draining {
				t.Errorf("snapshot status of p1 = %+v %v, want draining", st, ok)
			}
			// Deregister is re-issued while draining (HAProxy advances the
			// drain per call), and stops once the provider lets go.
			e.mustReconcile("b")
			before := e.calls(lbfake.OpDeregister)
			e.p.Step()
			e.mustReconcile("b")
			e.mustReconcile("b")
			if after := e.calls(lbfake.OpDeregister); after != before {
				t.Errorf("deregister called %d more times after the target was gone", after-before)
			}
			if slices.ContainsFunc(e.states(), func(s string) bool { return strings.HasPrefix(s, "10.244.1.5:") }) {
				t.Errorf("p1 still listed: %v", e.states())
			}
			if n := e.rec.Count("Pod ingress/p1", "Deregistered"); n > 1 {
				t.Errorf("%d Deregistered events, want at most one", n)
			}
		})
	}
}

func TestProviderErrors(t *testing.T) {
	cases := []struct {
		name   string
		op     lbfake.Op
		err    error
		reason string
	}{
		{"listing unreachable", lbfake.OpTargets, lb.ErrUnreachable, "ProviderUnreachable"},
		{"register fails", lbfake.OpRegister, errors.New("boom"), "ProviderError"},
		{"backend missing", lbfake.OpTargets, lb.ErrGroupNotFound, "GroupNotFound"},
		{"backend not dynamic", lbfake.OpRegister, lb.ErrNotDynamic, "GroupNotDynamic"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, ct.Pod("p1", "10.244.1.5"), ct.Binding("b"))
			e.p.Fail(tc.op, tc.err, 2)
			for range 2 {
				if _, err := e.reconcile("b"); !errors.Is(err, tc.err) {
					t.Fatalf("reconcile error = %v, want %v (so the controller retries with backoff)", err, tc.err)
				}
			}
			b := e.binding("b")
			for _, typ := range []string{v1alpha1.ConditionProviderReachable, v1alpha1.ConditionReady} {
				if c := condition(b, typ); c.Status != metav1.ConditionFalse || c.Reason != tc.reason {
					t.Errorf("%s = %s/%s, want False/%s", typ, c.Status, c.Reason, tc.reason)
				}
			}
			if b.Status.LastError == "" {
				t.Error("lastError empty")
			}
			if n := e.rec.Count("LoadBalancerBinding ingress/b", "ProviderError"); n != 2 {
				t.Errorf("ProviderError events = %d, want 2", n)
			}
			if got := testutil.ToFloat64(counter(t, e.reg)); got != 2 {
				t.Errorf("sluice_controller_provider_errors_total = %v, want 2", got)
			}
			// The provider recovers: one target, registered once more at
			// most, and nothing on the next round.
			e.mustReconcile("b")
			e.mustReconcile("b")
			if got := e.states(); !slices.Equal(got, []string{"10.244.1.5:8080=initial"}) {
				t.Fatalf("targets = %v", got)
			}
			ok := 0
			for _, c := range e.p.Calls() {
				if c.Op == lbfake.OpRegister && c.Err == nil {
					ok++
				}
			}
			if ok != 1 {
				t.Errorf("%d successful Register calls, want 1", ok)
			}
			b = e.binding("b")
			if c := condition(b, v1alpha1.ConditionProviderReachable); c.Status != metav1.ConditionTrue || b.Status.LastError != "" {
				t.Errorf("after recovery: %+v lastError %q", c, b.Status.LastError)
			}
		})
	}
}

func counter(t *testing.T, reg *prometheus.Registry) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "sluice_controller_provider_errors_total" && len(mf.GetMetric()) == 1 {
			v := mf.GetMetric()[0].GetCounter().GetValue()
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, func() float64 { return v })
		}
	}
	t.Fatal("no sluice_controller_provider_errors_total")
	return nil
}

func TestRestartPicksUpProviderState(t *testing.T) {
	now := ct.NewClock().Now()
	e := newEnv(t, ct.Pod("p1", "10.244.1.5"), ct.Pod("p2", "10.244.1.6"), ct.Pod("p3", "10.244.1.7", ct.Deleting(now)), ct.Binding("b"))
	// Before the "crash": p3 was registered and is now being deregistered.
	if err := e.p.Register(context.Background(), ct.Backend, []lb.Target{ct.Target("10.244.1.5"), ct.Target("10.244.1.7")}); err != nil {
		t.Fatal(err)
	}
	e.p.Step()
	e.restart()
	calls := len(e.p.Calls())
	res := e.mustReconcile("b")
	var reg, dereg []lb.Target
	for _, c := range e.p.Calls()[calls:] {
		switch c.Op {
		case lbfake.OpRegister:
			reg = append(reg, c.Targets...)
		case lbfake.OpDeregister:
			dereg = append(dereg, c.Targets...)
		}
	}
	if !slices.Equal(reg, []lb.Target{ct.Target("10.244.1.6")}) || !slices.Equal(dereg, []lb.Target{ct.Target("10.244.1.7")}) {
		t.Errorf("after restart registered %v, deregistered %v; want only p2 and p3", reg, dereg)
	}
	if got := e.states(); !slices.Equal(got, []string{"10.244.1.5:8080=healthy", "10.244.1.6:8080=initial", "10.244.1.7:8080=draining"}) {
		t.Errorf("targets = %v", got)
	}
	if res.RequeueAfter != time.Second {
		t.Errorf("requeue %v", res.RequeueAfter)
	}
	snap := e.store.Get(types.NamespacedName{Namespace: ct.Namespace, Name: "b"})
	if pt := snap.Pods["p3"]; !pt.Deleting || !pt.HasTarget || pt.Desired {
		t.Errorf("snapshot of p3 = %+v", pt)
	}
	if pt := snap.Pods["p1"]; !pt.Desired {
		t.Errorf("snapshot of p1 = %+v", pt)
	}
}

func TestInvalidProvider(t *testing.T) {
	cases := []struct {
		name   string
		spec   v1alpha1.ProviderSpec
		reason string
	}{
		{"neither haproxy nor aws", v1alpha1.ProviderSpec{}, "InvalidProvider"},
		{"not supported", v1alpha1.ProviderSpec{AWS: &v1alpha1.AWSProvider{}}, "ProviderNotSupported"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := func(b *v1alpha1.LoadBalancerBinding) { b.Spec.Provider = tc.spec }
			e := newEnv(t, ct.Pod("p1", "10.244.1.5"), ct.Binding("b", spec))
			res, err := e.reconcile("b")
			if err != nil || res.RequeueAfter != 0 {
				t.Fatalf("reconcile = %+v, %v; want no retry", res, err)
			}
			b := e.binding("b")
			if c := condition(b, v1alpha1.ConditionProviderReachable); c.Status != metav1.ConditionFalse || c.Reason != tc.reason {
				t.Errorf("ProviderReachable = %+v", c)
			}
			if len(e.p.Calls()) != 0 {
				t.Errorf("provider called: %v", e.p.Calls())
			}
		})
	}
}

func TestDeletedBindingDeregistersEverything(t *testing.T) {
	e := newEnv(t, ct.Pod("p1", "10.244.1.5"), ct.Binding("b"))
	e.mustReconcile("b")
	if b := e.binding("b"); !slices.Contains(b.Finalizers, binding.Finalizer) {
		t.Fatalf("finalizers = %v", b.Finalizers)
	}
	if err := e.c.Delete(context.Background(), e.binding("b")); err != nil {
		t.Fatal(err)
	}
	// Its pod still runs: the deletion is held until confirmed.
	e.mustReconcile("b")
	if got := e.states(); !slices.Equal(got, []string{"10.244.1.5:8080=initial"}) {
		t.Fatalf("targets of a held deletion = %v", got)
	}
	if c := condition(e.binding("b"), v1alpha1.ConditionHeld); c.Status != metav1.ConditionTrue || c.Reason != binding.ReasonHeld {
		t.Fatalf("Held = %+v", c)
	}
	confirm(t, e.c, e.binding("b"))
	e.mustReconcile("b")
	if got := e.states(); !slices.Equal(got, []string{"10.244.1.5:8080=draining"}) {
		t.Fatalf("targets = %v", got)
	}
	e.p.Step()
	e.mustReconcile("b")
	var b v1alpha1.LoadBalancerBinding
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: ct.Namespace, Name: "b"}, &b); !apierrors.IsNotFound(err) {
		t.Fatalf("binding still there (%v): %+v", err, b.Finalizers)
	}
	if e.store.Get(types.NamespacedName{Namespace: ct.Namespace, Name: "b"}) != nil {
		t.Error("snapshot kept")
	}
	if e.notified[types.NamespacedName{Namespace: ct.Namespace, Name: "p1"}] == 0 {
		t.Error("p1 not notified")
	}
}

func TestNotifiesChangedPodsOnly(t *testing.T) {
	e := newEnv(t, ct.Pod("p1", "10.244.1.5"), ct.Pod("p2", "10.244.1.6"), ct.Binding("b"))
	e.mustReconcile("b")
	p1 := types.NamespacedName{Namespace: ct.Namespace, Name: "p1"}
	p2 := types.NamespacedName{Namespace: ct.Namespace, Name: "p2"}
	if e.notified[p1] != 1 || e.notified[p2] != 1 {
		t.Fatalf("first round notified %v", e.notified)
	}
	e.mustReconcile("b") // nothing changed
	if e.notified[p1] != 1 || e.notified[p2] != 1 {
		t.Fatalf("idle round notified %v", e.notified)
	}
	e.p.SetHealth(ct.Backend, ct.Target("10.244.1.6"), lb.Unhealthy, "L7STS 503")
	e.p.Step()
	e.mustReconcile("b")
	if e.notified[p1] != 2 || e.notified[p2] != 2 {
		t.Fatalf("health round notified %v", e.notified)
	}
}

// TestStatusAddresses: spec.publish becomes status.addresses, and a
// removed publish list clears them (an HAProxy provider finds nothing).
func TestStatusAddresses(t *testing.T) {
	e := newEnv(t, ct.Binding("b", ct.Publish(v1alpha1.PublishAddress{IP: "192.0.2.1"}, v1alpha1.PublishAddress{Hostname: "lb.example.com"})))
	e.mustReconcile("b")
	want := []v1alpha1.LoadBalancerAddress{{IP: "192.0.2.1"}, {Hostname: "lb.example.com"}}
	if got := e.binding("b").Status.Addresses; !reflect.DeepEqual(got, want) {
		t.Fatalf("status.addresses = %+v, want %+v", got, want)
	}
	b := e.binding("b")
	b.Spec.Publish = nil
	e.update(b)
	e.mustReconcile("b")
	if got := e.binding("b").Status.Addresses; len(got) != 0 {
		t.Fatalf("status.addresses = %+v after publish was removed, want none", got)
	}
}

// confirm annotates b with sluice.dev/confirm-deregister: its generation.
func confirm(t *testing.T, c client.Client, b *v1alpha1.LoadBalancerBinding) {
	t.Helper()
	orig := b.DeepCopy()
	if b.Annotations == nil {
		b.Annotations = map[string]string{}
	}
	b.Annotations[v1alpha1.AnnotationConfirmDeregister] = strconv.FormatInt(b.Generation, 10)
	if err := c.Patch(context.Background(), b, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}
