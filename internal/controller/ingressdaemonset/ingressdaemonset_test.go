package ingressdaemonset_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/controller/ingressdaemonset"
	"sluice.dev/sluice/internal/controller/snapshot"
	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/nodes"
	"sluice.dev/sluice/internal/targets"
)

const ns = controllertest.Namespace

var key = types.NamespacedName{Namespace: ns, Name: "edge"}

func newIDS() *v1alpha1.IngressDaemonSet {
	two := int32(2)
	return &v1alpha1.IngressDaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge", UID: "ids-uid", Generation: 1},
		Spec: v1alpha1.IngressDaemonSetSpec{
			PodsPerNode:         &two,
			HealthCheckNodePort: 10080,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "sluice"}},
				Spec:       corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "proxy", Image: "sluice", Args: []string{"proxy"}}}},
			},
		},
	}
}

func node(name, ip string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}},
	}
}

// world simulates what the reconciler acts on: the Deployment controller
// rolls a Deployment out at once, and the binding lists a node's target
// healthy while it is attached and drops it while it is detached.
type world struct {
	t      *testing.T
	c      client.Client
	ips    map[string]string
	b      *v1alpha1.LoadBalancerBinding
	snap   *snapshot.Snapshot
	detach map[string]int // node → times seen detached while its Deployment changed spec
}

func (w *world) settle(ctx context.Context) {
	w.t.Helper()
	var ds appsv1.DeploymentList
	if err := w.c.List(ctx, &ds, client.InNamespace(ns)); err != nil {
		w.t.Fatal(err)
	}
	for i := range ds.Items {
		d := &ds.Items[i]
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: *d.Spec.Replicas,
			UpdatedReplicas: *d.Spec.Replicas, ReadyReplicas: *d.Spec.Replicas, AvailableReplicas: *d.Spec.Replicas}
		if err := w.c.Status().Update(ctx, d); err != nil {
			w.t.Fatal(err)
		}
	}
	var nl corev1.NodeList
	if err := w.c.List(ctx, &nl); err != nil {
		w.t.Fatal(err)
	}
	g := snapshot.Group{Name: "be", Synced: true}
	for _, n := range nl.Items {
		if n.Annotations[v1alpha1.DefaultDetachAnnotation] == "true" {
			continue
		}
		g.Targets = append(g.Targets, lb.Status{Target: lb.Target{Address: netip.MustParseAddrPort(w.ips[n.Name] + ":80")}, State: lb.Healthy})
	}
	w.snap = &snapshot.Snapshot{Binding: client.ObjectKeyFromObject(w.b), Generation: w.b.Generation, Instance: true, Groups: []snapshot.Group{g}}
}

func (w *world) reconciler(now func() time.Time) *ingressdaemonset.Reconciler {
	r, err := ingressdaemonset.New(ingressdaemonset.Options{
		Client: w.c, Now: now, Recorder: &controllertest.Recorder{},
		Snapshots: func(n types.NamespacedName) *snapshot.Snapshot {
			if n == client.ObjectKeyFromObject(w.b) {
				return w.snap
			}
			return nil
		},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

func TestRolloutNodeByNode(t *testing.T) {
	ctx := context.Background()
	b := controllertest.Binding("edge")
	b.Spec.TargetType = v1alpha1.TargetInstance
	b.Spec.Port = intstr.FromInt32(80)
	ips := map[string]string{"a": "10.0.0.1", "b": "10.0.0.2", "c": "10.0.0.3"}
	c := fake.NewClientBuilder().WithScheme(controllertest.Scheme()).
		WithStatusSubresource(&v1alpha1.IngressDaemonSet{}, &appsv1.Deployment{}).
		WithObjects(newIDS(), b, node("a", ips["a"]), node("b", ips["b"]), node("c", ips["c"])).Build()
	w := &world{t: t, c: c, ips: ips, b: b}
	clock := controllertest.NewClock()
	r := w.reconciler(clock.Now)
	step := func() {
		t.Helper()
		w.settle(ctx)
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		clock.Advance(time.Second)
	}
	for range 3 {
		step()
	}
	var ds appsv1.DeploymentList
	if err := c.List(ctx, &ds, client.InNamespace(ns)); err != nil || len(ds.Items) != 3 {
		t.Fatalf("deployments: %d, %v", len(ds.Items), err)
	}
	var hc appsv1.DaemonSet
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "edge-10080"}, &hc); err != nil {
		t.Fatalf("health checker: %v", err)
	}

	// Change the template; roll with a controller restart in the middle.
	var ids v1alpha1.IngressDaemonSet
	if err := c.Get(ctx, key, &ids); err != nil {
		t.Fatal(err)
	}
	ids.Spec.Template.Spec.Containers[0].Args = []string{"proxy", "--v2"}
	ids.Generation = 2
	if err := c.Update(ctx, &ids); err != nil {
		t.Fatal(err)
	}
	want := func(n string) string { return nodes.Deployment(&ids, n).Annotations[v1alpha1.AnnotationObjectHash] }
	order := []string{}
	for i := 0; i < 40; i++ {
		if i == 5 {
			r = w.reconciler(clock.Now) // a new leader, nothing in memory
		}
		step()
		var nl corev1.NodeList
		if err := c.List(ctx, &nl); err != nil {
			t.Fatal(err)
		}
		detached := 0
		for _, n := range nl.Items {
			if n.Annotations[v1alpha1.DefaultDetachAnnotation] == "true" {
				detached++
			}
		}
		if detached > 1 {
			t.Fatalf("step %d: %d nodes detached at once, maxDegradedNodes is 1", i, detached)
		}
		if err := c.List(ctx, &ds, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, d := range ds.Items {
			n := d.Spec.Template.Spec.NodeName
			if d.Annotations[v1alpha1.AnnotationObjectHash] == want(n) && !contains(order, n) {
				order = append(order, n)
				var nd corev1.Node
				if err := c.Get(ctx, types.NamespacedName{Name: n}, &nd); err != nil {
					t.Fatal(err)
				}
				if nd.Annotations[v1alpha1.DefaultDetachAnnotation] != "true" || nd.Labels[targets.LabelExcludeFromLB] != "true" ||
					nd.Annotations[v1alpha1.AnnotationUpdatePending] != "true" {
					t.Fatalf("node %s updated without being detached: %v %v", n, nd.Labels, nd.Annotations)
				}
			}
		}
	}
	if err := c.Get(ctx, key, &ids); err != nil {
		t.Fatal(err)
	}
	var nl corev1.NodeList
	if err := c.List(ctx, &nl); err != nil {
		t.Fatal(err)
	}
	for _, n := range nl.Items {
		if len(n.Labels)+len(n.Annotations) > 0 {
			t.Fatalf("node %s keeps %v %v after the rollout", n.Name, n.Labels, n.Annotations)
		}
	}
	if len(order) != 3 {
		t.Fatalf("updated nodes %v, want all three; status %+v", order, ids.Status)
	}
	if err := c.Get(ctx, key, &ids); err != nil {
		t.Fatal(err)
	}
	if ids.Status.Nodes != (v1alpha1.NodeCounts{Desired: 3, Ready: 3, Updated: 3}) {
		t.Fatalf("status nodes = %+v", ids.Status.Nodes)
	}
	if c := meta.FindStatusCondition(ids.Status.Conditions, v1alpha1.ConditionProgressing); c == nil || c.Reason != "Complete" {
		t.Fatalf("progressing = %+v", c)
	}
}

func TestFailedNodeStopsRollout(t *testing.T) {
	ctx := context.Background()
	ids := newIDS()
	ids.Finalizers = []string{ingressdaemonset.Finalizer}
	d := nodes.Deployment(ids, "a")
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "pods crash"}}
	c := fake.NewClientBuilder().WithScheme(controllertest.Scheme()).
		WithStatusSubresource(&v1alpha1.IngressDaemonSet{}, &appsv1.Deployment{}).
		WithObjects(ids, d, node("a", "10.0.0.1")).Build()
	rec := &controllertest.Recorder{}
	r, err := ingressdaemonset.New(ingressdaemonset.Options{Client: c, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}
	var got v1alpha1.IngressDaemonSet
	if err := c.Get(ctx, key, &got); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionProgressing)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonNodeFailed {
		t.Fatalf("progressing = %+v", cond)
	}
	if n := rec.Count("*v1alpha1.IngressDaemonSet ingress/edge", v1alpha1.ReasonNodeFailed); n != 1 {
		t.Fatalf("NodeFailed events = %d, want 1 (once per failure): %+v", n, rec.Events())
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestDeletionReattachesNodes(t *testing.T) {
	ctx := context.Background()
	ids := newIDS()
	ids.Finalizers = []string{ingressdaemonset.Finalizer}
	now := metav1.Now()
	ids.DeletionTimestamp = &now
	ours := node("a", "10.0.0.1")
	ours.Labels = map[string]string{targets.LabelExcludeFromLB: "true"}
	ours.Annotations = map[string]string{
		v1alpha1.DefaultDetachAnnotation: "true", v1alpha1.AnnotationDetachedBy: "ingress/edge",
		v1alpha1.AnnotationExcludedBy: "ingress/edge", v1alpha1.AnnotationUpdatePending: "true",
	}
	theirs := node("b", "10.0.0.2")
	theirs.Labels = map[string]string{targets.LabelExcludeFromLB: "true"}
	theirs.Annotations = map[string]string{v1alpha1.DefaultDetachAnnotation: "true"}
	c := fake.NewClientBuilder().WithScheme(controllertest.Scheme()).
		WithStatusSubresource(&v1alpha1.IngressDaemonSet{}).WithObjects(ids, ours, theirs).Build()
	r, err := ingressdaemonset.New(ingressdaemonset.Options{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	var a, b corev1.Node
	if err := c.Get(ctx, types.NamespacedName{Name: "a"}, &a); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, types.NamespacedName{Name: "b"}, &b); err != nil {
		t.Fatal(err)
	}
	if len(a.Labels)+len(a.Annotations) != 0 {
		t.Fatalf("node a keeps %v %v", a.Labels, a.Annotations)
	}
	if b.Labels[targets.LabelExcludeFromLB] != "true" || b.Annotations[v1alpha1.DefaultDetachAnnotation] != "true" {
		t.Fatalf("node b, detached by someone else, lost %v %v", b.Labels, b.Annotations)
	}
	if err := c.Get(ctx, key, &v1alpha1.IngressDaemonSet{}); err == nil {
		t.Fatal("the IngressDaemonSet kept its finalizer")
	}
}

// An IngressDaemonSet outside the allowed namespaces gets nothing: no
// finalizer, Deployment, DaemonSet, budget or node annotation; it says
// why in its Progressing condition and one Event, however often it is
// reconciled.
func TestForbiddenNamespace(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(controllertest.Scheme()).
		WithStatusSubresource(&v1alpha1.IngressDaemonSet{}, &appsv1.Deployment{}).
		WithObjects(newIDS(), node("a", "10.0.0.1")).Build()
	rec := &controllertest.Recorder{}
	r, err := ingressdaemonset.New(ingressdaemonset.Options{Client: c, Recorder: rec, Check: func(namespace string) error {
		if namespace != "sluice-system" {
			return errors.New("namespace not allowed")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}
	var ids v1alpha1.IngressDaemonSet
	if err := c.Get(ctx, key, &ids); err != nil {
		t.Fatal(err)
	}
	if len(ids.Finalizers) != 0 {
		t.Errorf("finalizers %v on a forbidden IngressDaemonSet", ids.Finalizers)
	}
	cond := meta.FindStatusCondition(ids.Status.Conditions, v1alpha1.ConditionProgressing)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != ingressdaemonset.ReasonForbidden || cond.Message != "namespace not allowed" {
		t.Errorf("Progressing = %+v, want False/%s", cond, ingressdaemonset.ReasonForbidden)
	}
	if n := rec.Count("*v1alpha1.IngressDaemonSet "+key.String(), ingressdaemonset.ReasonForbidden); n != 1 {
		t.Errorf("%d Forbidden Events, want 1 (%v)", n, rec.Events())
	}
	var deploys appsv1.DeploymentList
	var daemonsets appsv1.DaemonSetList
	var budgets policyv1.PodDisruptionBudgetList
	for _, l := range []client.ObjectList{&deploys, &daemonsets, &budgets} {
		if err := c.List(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(deploys.Items) + len(daemonsets.Items) + len(budgets.Items); n != 0 {
		t.Errorf("%d objects created for a forbidden IngressDaemonSet", n)
	}
	var n corev1.Node
	if err := c.Get(ctx, types.NamespacedName{Name: "a"}, &n); err != nil {
		t.Fatal(err)
	}
	if len(n.Annotations)+len(n.Labels) != 0 {
		t.Errorf("node touched: %v %v", n.Annotations, n.Labels)
	}
}

// TestWithoutWriteAccess: where the controller may not write an
// IngressDaemonSet (the chart grants it only in the allowed namespaces),
// the object is reported once (a Forbidden Event), without an error loop:
// a refused one whose status cannot be written, and a deleted one whose
// finalizer can no longer be removed (its namespace left the allowed ones).
func TestWithoutWriteAccess(t *testing.T) {
	forbidden := func(resource, name string) error {
		return apierrors.NewForbidden(schema.GroupResource{Group: "sluice.dev", Resource: resource}, name, errors.New("RBAC"))
	}
	deleted := newIDS()
	deleted.Finalizers = []string{ingressdaemonset.Finalizer}
	now := metav1.Now()
	deleted.DeletionTimestamp = &now
	for _, tc := range []struct {
		name  string
		ids   *v1alpha1.IngressDaemonSet
		check func(string) error
		// funcs refuse the write under test and count the refusals.
		funcs func(tried *int) interceptor.Funcs
	}{{
		name:  "status of a refused IngressDaemonSet",
		ids:   newIDS(),
		check: func(string) error { return errors.New("namespace not allowed") },
		funcs: func(tried *int) interceptor.Funcs {
			return interceptor.Funcs{SubResourceUpdate: func(context.Context, client.Client, string, client.Object, ...client.SubResourceUpdateOption) error {
				*tried++
				return forbidden("ingressdaemonsets/status", key.Name)
			}}
		},
	}, {
		name: "finalizer of a deleted IngressDaemonSet",
		ids:  deleted,
		funcs: func(tried *int) interceptor.Funcs {
			return interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.UpdateOption) error {
				if _, ok := obj.(*v1alpha1.IngressDaemonSet); ok {
					*tried++
					return forbidden("ingressdaemonsets", obj.GetName())
				}
				return c.Update(ctx, obj, o...)
			}}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tried := 0
			c := fake.NewClientBuilder().WithScheme(controllertest.Scheme()).
				WithStatusSubresource(&v1alpha1.IngressDaemonSet{}, &appsv1.Deployment{}).
				WithObjects(tc.ids, node("a", "10.0.0.1")).
				WithInterceptorFuncs(tc.funcs(&tried)).Build()
			rec := &controllertest.Recorder{}
			r, err := ingressdaemonset.New(ingressdaemonset.Options{Client: c, Recorder: rec, Check: tc.check})
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
					t.Fatalf("reconcile with the write forbidden: %v", err)
				}
			}
			if tried == 0 {
				t.Error("no write tried: the test cannot tell a refused write from none")
			}
			if n := rec.Count("*v1alpha1.IngressDaemonSet "+key.String(), ingressdaemonset.ReasonForbidden); n != 1 {
				t.Errorf("%d Forbidden Events, want 1 (%v)", n, rec.Events())
			}
		})
	}
}
