//go:build e2e

package drain

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/test/cluster"
)

func TestE2EWatchAndGracePeriod(t *testing.T) {
	client, ns := cluster.NamespaceForTest(t, "sldrn", "sluice-drain")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	grace := int64(17)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "proxy", Namespace: ns},
		Spec: corev1.PodSpec{
			// A node that does not exist: nothing schedules or runs it.
			NodeName:                      "sluice-e2e-nowhere",
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []corev1.Container{{Name: "c", Image: "none"}},
		},
	}
	// Pod admission needs the namespace's default ServiceAccount, which the
	// controller-manager creates; make it here when the cluster has none.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ch := Watch(ctx, client, ns, "proxy", slog.New(slog.DiscardHandler))
	if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if d, err := GracePeriod(ctx, client, ns, "proxy"); err != nil || d != 17*time.Second {
		t.Errorf("GracePeriod = %v, %v; want 17s", d, err)
	}
	setCond := func(s corev1.ConditionStatus) {
		t.Helper()
		cur, err := client.CoreV1().Pods(ns).Get(ctx, "proxy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Status.Conditions = []corev1.PodCondition{{Type: Condition, Status: s, LastTransitionTime: metav1.Now()}}
		if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setCond(corev1.ConditionFalse)
	notClosed(t, ch, "with the condition False")
	setCond(corev1.ConditionTrue)
	closed(t, ch, "with the condition True")
}
