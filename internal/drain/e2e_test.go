//go:build e2e

package drain

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"sluice.dev/sluice/test/cluster"
)

// realClient connects to the cluster named by SLUICE_KUBECONFIG, or, when it
// is unset, starts the local cluster of test/cluster (a real kube-apiserver;
// one node: the test runs no pods), and makes a namespace the test deletes
// at the end.
func realClient(t *testing.T) (kubernetes.Interface, string) {
	t.Helper()
	path := os.Getenv("SLUICE_KUBECONFIG")
	if path == "" {
		c := cluster.StartForTest(t, cluster.Options{Nodes: cluster.Nodes(1, 1), Prefix: "sldrn"})
		path = c.Kubeconfig()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := "sluice-drain-" + time.Now().Format("150405.000000")[7:]
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting namespace %s: %v", ns, err)
		}
	})
	return client, ns
}

func TestE2EWatchAndGracePeriod(t *testing.T) {
	client, ns := realClient(t)
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
