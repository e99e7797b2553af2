package nodes

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"sluice.dev/sluice/api/v1alpha1"
)

// FuzzCompute feeds node annotations (set by anyone who may annotate
// nodes: node-detacher, admins) and node names into Compute: it must never
// panic, and a node whose timestamps do not parse is not treated as
// drained.
func FuzzCompute(f *testing.F) {
	f.Add("node-a", "2026-11-25T02:00:00Z", "2026-11-25T01:59:00Z", "ingress/edge")
	f.Add("n", "", "not a time", "")
	f.Add("a/b", "9999-99-99T99:99:99Z", "2026-11-25T02:00:00+25:00", "x/y")
	f.Fuzz(func(t *testing.T, name, started, stamp, by string) {
		x := ids(v2, func(x *v1alpha1.IngressDaemonSet) {
			x.Spec.UpdateStrategy.RollingUpdate.AnnotateNodeToDetach = &v1alpha1.AnnotateToDetach{Key: v1alpha1.DefaultDetachAnnotation}
			x.Spec.UpdateStrategy.RollingUpdate.WaitForDetachmentByAnnotatedTimestamp = &v1alpha1.WaitForDetachmentByAnnotatedTimestamp{Key: v1alpha1.DefaultDetachTimestampAnnotation}
		})
		n := node(name, func(n *corev1.Node) {
			n.Annotations = map[string]string{
				v1alpha1.DefaultDetachAnnotation:          "true",
				v1alpha1.AnnotationDetachStarted:          started,
				v1alpha1.AnnotationDetachedBy:             by,
				v1alpha1.DefaultDetachTimestampAnnotation: stamp,
			}
		})
		var deploys []*appsv1.Deployment
		if checkNodeName(x, name) == "" {
			deploys = append(deploys, deploy(ids(), name, true))
		}
		p := Compute(Input{IDS: x, Nodes: []*corev1.Node{n}, Deployments: deploys, Now: now})
		if _, err := time.Parse(time.RFC3339, stamp); err != nil && len(p.Update) > 0 {
			t.Fatalf("updated node %q with timestamp %q that does not parse", name, stamp)
		}
	})
}
