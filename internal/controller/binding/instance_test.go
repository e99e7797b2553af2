package binding_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/binding"
	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/controller/podstatus"
)

// An Instance binding maps its pods to their node's target: the gate
// follows the node target's health; the node target stays while one live
// pod on the node remains (a deleting pod is drained at once), and is
// deregistered when the last one is deleted, that pod's drain following
// the node target's.
func TestInstanceModeGateAndDrain(t *testing.T) {
	instance := func(b *v1alpha1.LoadBalancerBinding) {
		b.Spec.TargetType = v1alpha1.TargetInstance
		b.Spec.Port = intstr.FromInt32(30080)
	}
	hold := func(p *corev1.Pod) { p.Finalizers = []string{"test/hold"} }
	ready := ct.WithCondition(corev1.ContainersReady, corev1.ConditionTrue)
	e := newEnv(t, ct.Pod("p1", "10.244.1.5", hold, ready), ct.Pod("p2", "10.244.1.6", hold, ready),
		ct.Node("node-1", "zone-a"), ct.Binding("b", instance))
	key := types.NamespacedName{Namespace: ct.Namespace, Name: "b"}
	decide := func(name string) podstatus.Decision {
		t.Helper()
		var p corev1.Pod
		if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: ct.Namespace, Name: name}, &p); err != nil {
			t.Fatal(err)
		}
		b := e.binding("b")
		gate, handshake, timeout := binding.Settings(b)
		return podstatus.Decide(&p, []podstatus.View{{Binding: key.String(), Gate: gate, Handshake: handshake, DrainTimeout: timeout, Snap: e.store.Get(key)}}, e.clock.Now())
	}
	status := func(c *podstatus.Condition) string {
		if c == nil {
			return ""
		}
		return string(c.Status) + "/" + c.Reason
	}

	e.mustReconcile("b")
	if got := status(decide("p1").Gate); got != "False/TargetNotHealthy" {
		t.Errorf("gate while the node target is initial = %q", got)
	}
	e.p.Step()
	e.mustReconcile("b")
	if got := e.states(); !slices.Equal(got, []string{"10.0.0.1:30080=healthy"}) {
		t.Fatalf("targets %v, want the node's", got)
	}
	for _, p := range []string{"p1", "p2"} {
		if got := status(decide(p).Gate); got != "True/TargetHealthy" {
			t.Errorf("gate of %s with its node target healthy = %q, want True", p, got)
		}
	}

	// p1 deleted: p2 keeps the node target; p1 has nothing to wait for.
	if err := e.c.Delete(context.Background(), ct.Pod("p1", "")); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile("b")
	if got := e.states(); !slices.Equal(got, []string{"10.0.0.1:30080=healthy"}) {
		t.Errorf("targets after p1's deletion %v, want the node's, healthy", got)
	}
	if got := status(decide("p1").Drained); got != "True/NodeTargetStays" {
		t.Errorf("p1 drained = %q, want True/NodeTargetStays", got)
	}

	// p2, the last live pod, deleted: the node target drains at once and
	// p2's drain waits for it.
	if err := e.c.Delete(context.Background(), ct.Pod("p2", "")); err != nil {
		t.Fatal(err)
	}
	res := e.mustReconcile("b")
	if got := e.states(); !slices.Equal(got, []string{"10.0.0.1:30080=draining"}) {
		t.Fatalf("targets after the last pod's deletion %v, want the node's draining", got)
	}
	if res.RequeueAfter != time.Second {
		t.Errorf("requeue %v while draining, want fast", res.RequeueAfter)
	}
	if d := decide("p2"); d.Drained != nil || d.Wait <= 0 {
		t.Errorf("p2 while its node target drains: %+v, want a wait", d)
	}
	e.p.Step()
	e.mustReconcile("b")
	if got := status(decide("p2").Drained); got != "True/Deregistered" {
		t.Errorf("p2 drained after the node target left = %q, want True/Deregistered", got)
	}
}
