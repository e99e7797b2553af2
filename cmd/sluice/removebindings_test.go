package main

import (
	"context"
	"io"
	"strconv"
	"strings"
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
	if err := removeBindings(context.Background(), cl, "sluice-system", sel, time.Millisecond, io.Discard); err != nil {
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
	err := removeBindings(ctx, cl, "sluice-system", labels.SelectorFromSet(mine), time.Millisecond, io.Discard)
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
}
