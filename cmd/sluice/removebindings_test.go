package main

import (
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"sluice.dev/sluice/api/v1alpha1"
	ct "sluice.dev/sluice/internal/controller/controllertest"
)

func testBinding(name string, lbls map[string]string, finalizers ...string) *v1alpha1.LoadBalancerBinding {
	return &v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "sluice-system", Name: name, Labels: lbls, Finalizers: finalizers}}
}

// The release's bindings are deleted and awaited; others are left alone.
func TestRemoveBindings(t *testing.T) {
	mine := map[string]string{"app.kubernetes.io/instance": "sluice"}
	cl := ct.NewClient(interceptor.Funcs{}, testBinding("a", mine), testBinding("b", mine), testBinding("other", map[string]string{"app.kubernetes.io/instance": "x"}))
	sel := labels.SelectorFromSet(mine)
	if err := removeBindings(context.Background(), cl, "sluice-system", sel, removeOptions{interval: time.Millisecond}, io.Discard); err != nil {
		t.Fatal(err)
	}
	var left v1alpha1.LoadBalancerBindingList
	if err := cl.List(context.Background(), &left); err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 1 || left.Items[0].Name != "other" {
		t.Errorf("left %v, want only other", left.Items)
	}
}

// A binding whose finalizer nobody removes (no controller) makes it wait,
// then fail naming the binding.
func TestRemoveBindingsWaitsForFinalizer(t *testing.T) {
	mine := map[string]string{"app.kubernetes.io/instance": "sluice"}
	cl := ct.NewClient(interceptor.Funcs{}, testBinding("stuck", mine, "sluice.dev/deregister-targets"))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := removeBindings(ctx, cl, "sluice-system", labels.SelectorFromSet(mine), removeOptions{interval: time.Millisecond}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "stuck") {
		t.Fatalf("err = %v, want a timeout naming the binding", err)
	}
	var b v1alpha1.LoadBalancerBinding
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: "sluice-system", Name: "stuck"}, &b); err != nil || b.DeletionTimestamp == nil {
		t.Errorf("binding not marked deleted: %v %v", err, b.DeletionTimestamp)
	}
	// The deletion is confirmed, so the emptying guard lets the controller
	// deregister targets whose pods still run.
	if got, want := b.Annotations[v1alpha1.AnnotationConfirmDeregister], strconv.FormatInt(b.Generation, 10); got != want {
		t.Errorf("confirm-deregister = %q, want %q (the generation)", got, want)
	}
	if v, ok := b.Annotations[v1alpha1.AnnotationAbandonTargets]; ok {
		t.Errorf("abandon-targets = %q without --abandon", v)
	}
}

// --abandon annotates each deleted binding to abandon its targets, at its
// generation; a binding reporting DeletionBlocked is reported once.
func TestRemoveBindingsAbandon(t *testing.T) {
	mine := map[string]string{"app.kubernetes.io/instance": "sluice"}
	stuck := testBinding("stuck", mine, "sluice.dev/deregister-targets")
	stuck.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionDeletionBlocked, Status: metav1.ConditionTrue,
		Reason: "ProviderUnreachable", Message: "load balancer unreachable", LastTransitionTime: metav1.Now()}}
	cl := ct.NewClient(interceptor.Funcs{}, stuck)
	// No controller removes the finalizer here: the wait ends when the
	// test has seen both annotations and the report (30 s at most), not
	// after a fixed time a loaded machine may not give it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out syncBuilder
	go func() {
		for ctx.Err() == nil {
			var b v1alpha1.LoadBalancerBinding
			if cl.Get(ctx, client.ObjectKey{Namespace: "sluice-system", Name: "stuck"}, &b) == nil &&
				b.Annotations[v1alpha1.AnnotationAbandonTargets] != "" && b.Annotations[v1alpha1.AnnotationConfirmDeregister] != "" &&
				strings.Contains(out.String(), "deletion blocked") {
				time.Sleep(20 * time.Millisecond) // more rounds: the report must stay single
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	err := removeBindings(ctx, cl, "sluice-system", labels.SelectorFromSet(mine), removeOptions{interval: time.Millisecond, abandon: true}, &out)
	if err == nil {
		t.Fatal("no error, want a timeout (no controller removes the finalizer here)")
	}
	var b v1alpha1.LoadBalancerBinding
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: "sluice-system", Name: "stuck"}, &b); err != nil {
		t.Fatal(err)
	}
	gen := strconv.FormatInt(b.Generation, 10)
	for _, k := range []string{v1alpha1.AnnotationAbandonTargets, v1alpha1.AnnotationConfirmDeregister} {
		if got := b.Annotations[k]; got != gen {
			t.Errorf("%s = %q, want %q (the generation)", k, got, gen)
		}
	}
	if n := strings.Count(out.String(), "deletion blocked (ProviderUnreachable): load balancer unreachable"); n != 1 {
		t.Errorf("DeletionBlocked reported %d times, want 1:\n%s", n, out.String())
	}
}

// The release's IngressDaemonSets are deleted and awaited; others are left
// alone. One whose finalizer nobody removes makes it fail, naming it.
func TestRemoveIngressDaemonSets(t *testing.T) {
	mine := map[string]string{"app.kubernetes.io/instance": "sluice"}
	ids := func(name string, lbls map[string]string, finalizers ...string) *v1alpha1.IngressDaemonSet {
		return &v1alpha1.IngressDaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "sluice-system", Name: name, Labels: lbls, Finalizers: finalizers}}
	}
	cl := ct.NewClient(interceptor.Funcs{}, ids("proxy", mine), ids("other", map[string]string{"app.kubernetes.io/instance": "x"}))
	sel := labels.SelectorFromSet(mine)
	if err := removeIngressDaemonSets(context.Background(), cl, "sluice-system", sel, time.Millisecond, io.Discard); err != nil {
		t.Fatal(err)
	}
	var left v1alpha1.IngressDaemonSetList
	if err := cl.List(context.Background(), &left); err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 1 || left.Items[0].Name != "other" {
		t.Errorf("left %v, want only other", left.Items)
	}

	cl = ct.NewClient(interceptor.Funcs{}, ids("stuck", mine, "sluice.dev/ingress-daemonset"))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := removeIngressDaemonSets(ctx, cl, "sluice-system", sel, time.Millisecond, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "stuck") {
		t.Fatalf("err = %v, want a timeout naming the IngressDaemonSet", err)
	}
}

// syncBuilder is a strings.Builder safe for one writer and one reader.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
