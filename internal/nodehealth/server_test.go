package nodehealth

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
)

// The Checker follows the node's annotations and pods through its
// informers and answers 200/503 with the reason.
func TestCheckerServes(t *testing.T) {
	a := pod("a", "n1", true)
	a.Namespace, a.Labels = "ingress", map[string]string{"app": "proxy"}
	other := pod("x", "n1", false)
	other.Namespace, other.Labels = "ingress", map[string]string{"app": "other"}
	cs := fake.NewClientset(node("n1"), a, other)
	c := New(Options{Client: cs, NodeName: "n1", Namespace: "ingress",
		Selector: labels.SelectorFromSet(labels.Set{"app": "proxy"}),
		Rules:    Rules{DetachAnnotation: DefaultDetachAnnotation, DetachValue: "true", UpdatePendingAnnotation: DefaultUpdatePendingAnnotation}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.Start(ctx)
	srv := httptest.NewServer(c)
	defer srv.Close()
	answer := func() (int, string) {
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor := func(code int, want string) {
		t.Helper()
		var got int
		var body string
		for range 500 { // informer delivery, not a timing assertion
			if got, body = answer(); got == code && strings.Contains(body, want) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("got %d %q, want %d with %q", got, body, code, want)
	}
	waitFor(http.StatusOK, "ok: 1 of 1 replicas ready on node n1")

	n, _ := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	n.Annotations[DefaultUpdatePendingAnnotation] = "rev-2"
	if _, err := cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(http.StatusServiceUnavailable, "update pending")

	delete(n.Annotations, DefaultUpdatePendingAnnotation)
	if _, err := cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(http.StatusOK, "ok")
	if err := cs.CoreV1().Pods("ingress").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(http.StatusServiceUnavailable, "no replica")
}
