package drain

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// waitTimeout bounds every wait for an informer event; it is a deadlock
// guard, not a latency assertion.
const waitTimeout = 30 * time.Second

func pod(ns, name string, conds ...corev1.PodCondition) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Status: corev1.PodStatus{Conditions: conds}}
}

func drainedCond(s corev1.ConditionStatus) corev1.PodCondition {
	return corev1.PodCondition{Type: Condition, Status: s}
}

// notClosed asserts ch stays open for a short while. Informer events are
// asynchronous, so this catches a wrong close only when it is quick; the
// ordering test below (False, then True) is the sharp one.
func notClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("drained channel closed %s", what)
	case <-time.After(200 * time.Millisecond):
	}
}

func closed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		t.Fatalf("drained channel not closed %s", what)
	}
}

func TestWatchDrained(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := fake.NewClientset(
		pod("sluice", "proxy-0", corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}),
		// Another pod already drained: must not count (the fake clientset
		// ignores the field selector, so this checks the name filter too).
		pod("sluice", "proxy-1", drainedCond(corev1.ConditionTrue)),
	)
	ch := Watch(ctx, c, "sluice", "proxy-0", slog.New(slog.DiscardHandler))
	notClosed(t, ch, "without the condition")

	p := pod("sluice", "proxy-0", drainedCond(corev1.ConditionFalse))
	if _, err := c.CoreV1().Pods("sluice").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	notClosed(t, ch, "with the condition False")

	p = pod("sluice", "proxy-0", drainedCond(corev1.ConditionTrue))
	if _, err := c.CoreV1().Pods("sluice").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	closed(t, ch, "with the condition True")
}

// TestWatchDrainedOtherPod checks that only the named pod counts.
func TestWatchDrainedOtherPod(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := fake.NewClientset(pod("sluice", "proxy-0", drainedCond(corev1.ConditionFalse)))
	ch := Watch(ctx, c, "sluice", "proxy-0", slog.New(slog.DiscardHandler))
	if _, err := c.CoreV1().Pods("sluice").Create(ctx, pod("sluice", "proxy-1", drainedCond(corev1.ConditionTrue)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods("other").Create(ctx, pod("other", "proxy-0", drainedCond(corev1.ConditionTrue)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	notClosed(t, ch, "when other pods are drained")
	p := pod("sluice", "proxy-0", drainedCond(corev1.ConditionTrue))
	if _, err := c.CoreV1().Pods("sluice").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	closed(t, ch, "with the condition True")
}

func TestWatchDrainedPodAppearsLater(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := fake.NewClientset()
	ch := Watch(ctx, c, "sluice", "proxy-0", slog.New(slog.DiscardHandler))
	notClosed(t, ch, "without a pod")
	if _, err := c.CoreV1().Pods("sluice").Create(ctx, pod("sluice", "proxy-0", drainedCond(corev1.ConditionTrue)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	closed(t, ch, "after the pod appeared drained")
}

func TestWatchDrainedAlreadyDrained(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := fake.NewClientset(pod("sluice", "proxy-0", drainedCond(corev1.ConditionTrue)))
	closed(t, Watch(ctx, c, "sluice", "proxy-0", nil), "for a pod drained from the start")
}

func TestWatchDrainedContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := fake.NewClientset(pod("sluice", "proxy-0"))
	ch := Watch(ctx, c, "sluice", "proxy-0", slog.New(slog.DiscardHandler))
	cancel()
	notClosed(t, ch, "after ctx ended")
}

func TestHasDrained(t *testing.T) {
	for _, tc := range []struct {
		name  string
		conds []corev1.PodCondition
		want  bool
	}{
		{"none", nil, false},
		{"false", []corev1.PodCondition{drainedCond(corev1.ConditionFalse)}, false},
		{"unknown", []corev1.PodCondition{drainedCond(corev1.ConditionUnknown)}, false},
		{"true", []corev1.PodCondition{drainedCond(corev1.ConditionTrue)}, true},
		{"other true", []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}, false},
	} {
		if got := hasDrained(pod("ns", "p", tc.conds...)); got != tc.want {
			t.Errorf("%s: hasDrained = %v; want %v", tc.name, got, tc.want)
		}
	}
}

func TestPodGracePeriod(t *testing.T) {
	ctx := context.Background()
	withGrace := pod("sluice", "set")
	sec := int64(45)
	withGrace.Spec.TerminationGracePeriodSeconds = &sec
	zero := pod("sluice", "zero")
	zsec := int64(0)
	zero.Spec.TerminationGracePeriodSeconds = &zsec
	c := fake.NewClientset(withGrace, zero, pod("sluice", "unset"))

	for _, tc := range []struct {
		name string
		want time.Duration
	}{{"set", 45 * time.Second}, {"zero", 0}, {"unset", 30 * time.Second}} {
		got, err := GracePeriod(ctx, c, "sluice", tc.name)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s: grace period = %v; want %v", tc.name, got, tc.want)
		}
	}
	if _, err := GracePeriod(ctx, c, "sluice", "missing"); err == nil {
		t.Error("missing pod: no error")
	}
}
