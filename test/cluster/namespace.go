package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// NamespaceForTest returns a client of the cluster named by
// SLUICE_KUBECONFIG or, when it is unset, of a local cluster started for
// the test (one node, prefix as Options.Prefix: for tests that run no
// pods), and a new namespace, name + a random suffix, that is deleted when
// the test ends.
func NamespaceForTest(t testing.TB, prefix, name string) (kubernetes.Interface, string) {
	t.Helper()
	path := os.Getenv("SLUICE_KUBECONFIG")
	if path == "" {
		path = StartForTest(t, Options{Nodes: Nodes(1, 1), Prefix: prefix}).Kubeconfig()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	rand.Read(b)
	ns := name + "-" + hex.EncodeToString(b)
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting namespace %s: %v", ns, err)
		}
	})
	return client, ns
}
