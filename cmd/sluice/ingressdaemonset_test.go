package main

import (
	"io"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/nodes"
)

// TestHealthCheckerArgs keeps the IngressDaemonSet's health checker and
// `sluice node-health` in step: the controller's arguments parse, and say
// what the controller means.
func TestHealthCheckerArgs(t *testing.T) {
	t.Setenv("NODE_NAME", "node-1")
	ids := &v1alpha1.IngressDaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "edge-ns", Name: "edge"},
		Spec:       v1alpha1.IngressDaemonSetSpec{HealthCheckNodePort: 10080},
	}
	ds := nodes.HealthChecker(ids, "")
	args := ds.Spec.Template.Spec.Containers[0].Args
	if args[0] != "node-health" {
		t.Fatalf("args %v", args)
	}
	c, err := parseNodeHealthFlags(args[1:], io.Discard)
	if err != nil {
		t.Fatalf("sluice node-health %v: %v", args[1:], err)
	}
	if c.healthAddress != ":10080" || c.namespace != "edge-ns" || c.nodeName != "node-1" ||
		c.rules.DetachAnnotation != v1alpha1.DefaultDetachAnnotation || c.rules.DetachValue != "true" ||
		c.rules.UpdatePendingAnnotation != v1alpha1.AnnotationUpdatePending || c.selector.String() != v1alpha1.LabelIngressDaemonSet+"=edge" {
		t.Fatalf("parsed %+v", c)
	}
}
