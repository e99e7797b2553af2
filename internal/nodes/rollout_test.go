package nodes

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"sluice.dev/sluice/api/v1alpha1"
)

var now = time.Date(2026, 11, 25, 2, 0, 0, 0, time.UTC)

func ids(mutate ...func(*v1alpha1.IngressDaemonSet)) *v1alpha1.IngressDaemonSet {
	two := int32(2)
	x := &v1alpha1.IngressDaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: "ingress", UID: "u1"},
		Spec: v1alpha1.IngressDaemonSetSpec{
			PodsPerNode:         &two,
			HealthCheckNodePort: 10080,
			NodeSelector:        map[string]string{"role": "edge"},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "edge"}},
				Spec:       corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "proxy", Image: "sluice", Args: []string{"proxy", "--v1"}}}},
			},
		},
	}
	for _, m := range mutate {
		m(x)
	}
	return x
}

func v2(x *v1alpha1.IngressDaemonSet) {
	x.Spec.Template.Spec.Containers[0].Args = []string{"proxy", "--v2"}
}

type nodeOpt func(*corev1.Node)

func node(name string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"role": "edge"}}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func detachedAt(t time.Time) nodeOpt {
	return func(n *corev1.Node) {
		n.Annotations = map[string]string{
			v1alpha1.DefaultDetachAnnotation: "true",
			v1alpha1.AnnotationDetachStarted: t.Format(time.RFC3339),
			v1alpha1.AnnotationDetachedBy:    "ingress/edge",
		}
	}
}

func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }

// deploy is node's Deployment as of x's template, rolled out (ready) or not.
func deploy(x *v1alpha1.IngressDaemonSet, node string, ready bool) *appsv1.Deployment {
	d := Deployment(x, node)
	d.Generation = 3
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	if !ready {
		d.Status.ReadyReplicas, d.Status.AvailableReplicas = 1, 1
	}
	return d
}

func names(ds []*appsv1.Deployment) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}

func detachNodes(p Plan) []string {
	var out []string
	for _, d := range p.Detach {
		out = append(out, d.Node)
	}
	return out
}

func TestComputeCreatesAndDeletes(t *testing.T) {
	x := ids()
	other := node("c")
	other.Labels = map[string]string{"role": "web"}
	gone := deploy(x, "old", true)
	p := Compute(Input{IDS: x, Nodes: []*corev1.Node{node("b"), node("a"), other}, Deployments: []*appsv1.Deployment{gone}, Now: now})
	if got := names(p.Create); !slices.Equal(got, []string{"edge-a", "edge-b"}) {
		t.Fatalf("create = %v", got)
	}
	if got := detachNodes(p); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("joining nodes start detached: detach = %v", got)
	}
	if !slices.Equal(p.Delete, []string{"edge-old"}) {
		t.Fatalf("delete = %v", p.Delete)
	}
	d := p.Create[0]
	if d.Spec.Template.Spec.NodeName != "a" || d.Spec.Template.Labels[v1alpha1.LabelIngressDaemonForNode] != "a" ||
		d.Spec.Template.Labels["app"] != "edge" || *d.Spec.Replicas != 2 {
		t.Fatalf("deployment: %+v", d.Spec)
	}
	if len(d.OwnerReferences) != 1 || d.OwnerReferences[0].UID != "u1" || !*d.OwnerReferences[0].Controller {
		t.Fatalf("owner refs: %+v", d.OwnerReferences)
	}
	if x.Spec.Template.Labels[v1alpha1.LabelIngressDaemonForNode] != "" {
		t.Fatal("Deployment changed the IngressDaemonSet's template")
	}
	if p.Counts != (v1alpha1.NodeCounts{Desired: 2, Updated: 2}) {
		t.Fatalf("counts = %+v", p.Counts)
	}
}

func TestComputeRollout(t *testing.T) {
	old := ids()
	cur := ids(v2)
	served := NodeLB{Served: true, Synced: true, Listed: true, Healthy: true, DrainTimeout: time.Minute}
	drained := NodeLB{Served: true, Synced: true, DrainTimeout: time.Minute}
	tests := []struct {
		name                     string
		x                        *v1alpha1.IngressDaemonSet
		nodes                    []*corev1.Node
		deploys                  []*appsv1.Deployment
		lb                       map[string]NodeLB
		detach, update, reattach []string
		del, failed              []string
		requeue                  time.Duration
		rolling                  bool
		counts                   v1alpha1.NodeCounts
	}{{
		name:    "settled",
		x:       cur,
		nodes:   []*corev1.Node{node("a"), node("b")},
		deploys: []*appsv1.Deployment{deploy(cur, "a", true), deploy(cur, "b", true)},
		lb:      map[string]NodeLB{"a": served, "b": served},
		counts:  v1alpha1.NodeCounts{Desired: 2, Ready: 2, Updated: 2},
	}, {
		name:    "template change detaches one node (maxDegradedNodes 1)",
		x:       cur,
		nodes:   []*corev1.Node{node("a"), node("b"), node("c")},
		deploys: []*appsv1.Deployment{deploy(old, "a", true), deploy(old, "b", true), deploy(old, "c", true)},
		lb:      map[string]NodeLB{"a": served, "b": served, "c": served},
		detach:  []string{"a"},
		rolling: true,
		counts:  v1alpha1.NodeCounts{Desired: 3, Ready: 3},
	}, {
		name:    "detached node waits for the load balancer",
		x:       cur,
		nodes:   []*corev1.Node{node("a", detachedAt(now.Add(-time.Second))), node("b")},
		deploys: []*appsv1.Deployment{deploy(old, "a", true), deploy(old, "b", true)},
		lb:      map[string]NodeLB{"a": {Served: true, Synced: true, Listed: true, DrainTimeout: time.Minute}, "b": served},
		requeue: time.Minute - time.Second,
		rolling: true,
		counts:  v1alpha1.NodeCounts{Desired: 2, Ready: 1, Detached: 1},
	}, {
		name:    "an unsynced binding is not a drained one",
		x:       cur,
		nodes:   []*corev1.Node{node("a", detachedAt(now.Add(-time.Second))), node("b")},
		deploys: []*appsv1.Deployment{deploy(old, "a", true), deploy(old, "b", true)},
		lb:      map[string]NodeLB{"a": {Served: true, DrainTimeout: time.Minute}, "b": served},
		requeue: time.Minute - time.Second,
		rolling: true,
		counts:  v1alpha1.NodeCounts{Desired: 2, Ready: 1, Detached: 1},
	}, {
		name:    "drained node is updated",
		x:       cur,
		nodes:   []*corev1.Node{node("a", detachedAt(now.Add(-time.Second))), node("b")},
		deploys: []*appsv1.Deployment{deploy(old, "a", true), deploy(old, "b", true)},
		lb:      map[string]NodeLB{"a": drained, "b": served},
		update:  []string{"edge-a"},
		rolling: true,
		counts:  v1alpha1.NodeCounts{Desired: 2, Ready: 1, Detached: 1},
	}, {
		name:    "drain timeout passed: updated anyway",
		x:       cur,
		nodes:   []*corev1.Node{node("a", detachedAt(now.Add(-2*time.Minute))), node("b")},
		deploys: []*appsv1.Deployment{deploy(old, "a", true), deploy(old, "b", true)},
		lb:      map[string]NodeLB{"a": {Served: true, Synced: true, Listed: true, DrainTimeout: time.Minute}, "b": served},
		update:  []string{"edge-a"},
		rolling: true,
		counts:  v1alpha1.NodeCounts{Desired: 2, Ready: 1, Detached: 1},
	}, {
		name:    "updated node not ready yet: waits, nothing else detached",
		x:       cur,
		nodes:   []*corev1.Node{node("a", detachedAt(now)), node("b")},
		deploys: []*appsv1.Deployment{deploy(cur, "a", false), deploy(old, "b", true)},
		lb:      map[string]NodeLB{"a": drained, "b": served},
		rolling: true,
		counts:  v1alpha1.NodeCounts{Desired: 2, Ready: 1, Updated: 1, Detached: 1},
	}, {
		name:     "updated and ready: reattached",
		x:        cur,
		nodes:    []*corev1.Node{node("a", detachedAt(now)), node("b")},
		deploys:  []*appsv1.Deployment{deploy(cur, "a", true), deploy(old, "b", true)},
		lb:       map[string]NodeLB{"a": drained, "b": served},
		reattach: []string{"a"},
		rolling:  true,
		counts:   v1alpha1.NodeCounts{Desired: 2, Ready: 1, Updated: 1, Detached: 1},
	}, {
		name:    "reattached but not healthy yet: next node waits",
		x:       cur,
		nodes:   []*corev1.Node{node("a"), node("b")},
		deploys: []*appsv1.Deployment{deploy(cur, "a", true), deploy(old, "b", true)},
		lb:      map[string]NodeLB{"a": {Served: true, Synced: true, Listed: true}, "b": served},
		rolling: true,
		counts:  v1alpha1.NodeCounts{Desired: 2, Ready: 2, Updated: 1},
	}, {
		name:    "first node healthy again: next node detached",
		x:       cur,
		nodes:   []*corev1.Node{node("a"), node("b")},
		deploys: []*appsv1.Deployment{deploy(cur, "a", true), deploy(old, "b", true)},
		lb:      map[string]NodeLB{"a": served, "b": served},
		detach:  []string{"b"},
		rolling: true,
		counts:  v1alpha1.NodeCounts{Desired: 2, Ready: 2, Updated: 1},
	}, {
		name: "maxUnavailableNodes 2 detaches two",
		x: ids(v2, func(x *v1alpha1.IngressDaemonSet) {
			two := int32(2)
			x.Spec.UpdateStrategy.RollingUpdate.MaxUnavailableNodes = &two
		}),
		nodes:   []*corev1.Node{node("a"), node("b"), node("c")},
		deploys: []*appsv1.Deployment{deploy(old, "a", true), deploy(old, "b", true), deploy(old, "c", true)},
		detach:  []string{"a", "b"},
		rolling: true,
		counts:  v1alpha1.NodeCounts{Desired: 3, Ready: 3},
	}, {
		name:    "an unavailable outdated node goes first",
		x:       cur,
		nodes:   []*corev1.Node{node("a"), node("b")},
		deploys: []*appsv1.Deployment{deploy(old, "a", true), deploy(old, "b", false)},
		detach:  []string{"b"},
		rolling: true,
		counts:  v1alpha1.NodeCounts{Desired: 2, Ready: 1},
	}, {
		name:  "a failed node stops the rollout",
		x:     cur,
		nodes: []*corev1.Node{node("a", detachedAt(now)), node("b")},
		deploys: []*appsv1.Deployment{func() *appsv1.Deployment {
			d := deploy(cur, "a", false)
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "too slow"}}
			return d
		}(), deploy(old, "b", true)},
		failed:  []string{"a"},
		rolling: true,
		counts:  v1alpha1.NodeCounts{Desired: 2, Ready: 1, Updated: 1, Detached: 1},
	}, {
		name: "grace mode without a binding",
		x: ids(v2, func(x *v1alpha1.IngressDaemonSet) {
			x.Spec.UpdateStrategy.RollingUpdate.AnnotateNodeToDetach = &v1alpha1.AnnotateToDetach{Key: v1alpha1.DefaultDetachAnnotation, GracePeriodSeconds: 10}
		}),
		nodes:   []*corev1.Node{node("a", detachedAt(now.Add(-4*time.Second)))},
		deploys: []*appsv1.Deployment{deploy(old, "a", true)},
		requeue: 6 * time.Second,
		rolling: true,
		counts:  v1alpha1.NodeCounts{Desired: 1, Detached: 1},
	}, {
		name: "timestamp mode: waits for the annotation's grace period",
		x: ids(v2, func(x *v1alpha1.IngressDaemonSet) {
			x.Spec.UpdateStrategy.RollingUpdate.AnnotateNodeToDetach = &v1alpha1.AnnotateToDetach{Key: v1alpha1.DefaultDetachAnnotation}
			x.Spec.UpdateStrategy.RollingUpdate.WaitForDetachmentByAnnotatedTimestamp = &v1alpha1.WaitForDetachmentByAnnotatedTimestamp{Key: v1alpha1.DefaultDetachTimestampAnnotation, GracePeriodSeconds: 30}
		}),
		nodes: []*corev1.Node{node("a", detachedAt(now.Add(-time.Minute)), func(n *corev1.Node) {
			n.Annotations[v1alpha1.DefaultDetachTimestampAnnotation] = now.Add(-20 * time.Second).Format(time.RFC3339)
		})},
		deploys: []*appsv1.Deployment{deploy(old, "a", true)},
		requeue: 10 * time.Second,
		rolling: true,
		counts:  v1alpha1.NodeCounts{Desired: 1, Detached: 1},
	}, {
		name:    "cordoned node is detached first",
		x:       cur,
		nodes:   []*corev1.Node{node("a", cordoned), node("b")},
		deploys: []*appsv1.Deployment{deploy(cur, "a", true), deploy(cur, "b", true)},
		lb:      map[string]NodeLB{"a": served, "b": served},
		detach:  []string{"a"},
		counts:  v1alpha1.NodeCounts{Desired: 1, Ready: 1, Updated: 1},
	}, {
		name:    "cordoned node drained: its Deployment goes",
		x:       cur,
		nodes:   []*corev1.Node{node("a", cordoned, detachedAt(now)), node("b")},
		deploys: []*appsv1.Deployment{deploy(cur, "a", true), deploy(cur, "b", true)},
		lb:      map[string]NodeLB{"a": drained, "b": served},
		del:     []string{"edge-a"},
		counts:  v1alpha1.NodeCounts{Desired: 1, Ready: 1, Updated: 1, Detached: 1},
	}, {
		name:     "a node that left the selector is reattached",
		x:        cur,
		nodes:    []*corev1.Node{node("a", detachedAt(now), func(n *corev1.Node) { n.Labels = nil }), node("b")},
		deploys:  []*appsv1.Deployment{deploy(cur, "b", true)},
		lb:       map[string]NodeLB{"b": served},
		reattach: []string{"a"},
		counts:   v1alpha1.NodeCounts{Desired: 1, Ready: 1, Updated: 1},
	}, {
		name:    "node detached by node-detacher is taken over",
		x:       cur,
		nodes:   []*corev1.Node{node("a", func(n *corev1.Node) { n.Annotations = map[string]string{v1alpha1.DefaultDetachAnnotation: "true"} })},
		deploys: []*appsv1.Deployment{deploy(old, "a", true)},
		detach:  []string{"a"},
		rolling: true,
		counts:  v1alpha1.NodeCounts{Desired: 1, Detached: 1},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Compute(Input{IDS: tt.x, Nodes: tt.nodes, Deployments: tt.deploys, LB: tt.lb, Now: now})
			check := func(what string, got, want []string) {
				t.Helper()
				if !slices.Equal(got, want) {
					t.Errorf("%s = %v, want %v (waiting %v)", what, got, want, p.Waiting)
				}
			}
			check("detach", detachNodes(p), tt.detach)
			check("update", names(p.Update), tt.update)
			check("reattach", p.Reattach, tt.reattach)
			check("delete", p.Delete, tt.del)
			check("failed", p.Failed, tt.failed)
			check("create", names(p.Create), nil)
			if p.RequeueAfter != tt.requeue {
				t.Errorf("requeue = %v, want %v", p.RequeueAfter, tt.requeue)
			}
			if p.Rolling != tt.rolling {
				t.Errorf("rolling = %v, want %v", p.Rolling, tt.rolling)
			}
			if p.Counts != tt.counts {
				t.Errorf("counts = %+v, want %+v", p.Counts, tt.counts)
			}
		})
	}
}

func TestRolledOut(t *testing.T) {
	d := deploy(ids(), "a", true)
	if !rolledOut(d) {
		t.Fatal("a Deployment with every replica updated and ready is rolled out (the seed's off-by-one)")
	}
	d.Status.Replicas = 3 // an old pod still terminating or surged
	if rolledOut(d) {
		t.Fatal("an old pod left: not rolled out")
	}
	d = deploy(ids(), "a", true)
	d.Generation = 4
	if rolledOut(d) {
		t.Fatal("a spec the Deployment controller has not seen: not rolled out")
	}
}

func TestDeploymentStrategy(t *testing.T) {
	d := Deployment(ids(), "a")
	if ru := d.Spec.Strategy.RollingUpdate; ru.MaxUnavailable != nil || ru.MaxSurge != nil {
		t.Fatalf("degraded mode keeps the Deployment's defaults: %+v", ru)
	}
	one := int32(1)
	d = Deployment(ids(func(x *v1alpha1.IngressDaemonSet) { x.Spec.UpdateStrategy.RollingUpdate.MaxUnavailableNodes = &one }), "a")
	if ru := d.Spec.Strategy.RollingUpdate; ru.MaxUnavailable.String() != "100%" || ru.MaxSurge.String() != "0" {
		t.Fatalf("detach mode replaces every pod at once: %+v", ru)
	}
	surge := intstr.FromInt32(1)
	d2 := Deployment(ids(func(x *v1alpha1.IngressDaemonSet) { x.Spec.UpdateStrategy.RollingUpdate.MaxSurgedPodsPerNode = &surge }), "a")
	if d2.Annotations[v1alpha1.AnnotationObjectHash] == Deployment(ids(), "a").Annotations[v1alpha1.AnnotationObjectHash] {
		t.Fatal("a strategy change must change the hash")
	}
	three := int32(3)
	if Deployment(ids(func(x *v1alpha1.IngressDaemonSet) { x.Spec.PodsPerNode = &three }), "a").Annotations[v1alpha1.AnnotationObjectHash] !=
		Deployment(ids(), "a").Annotations[v1alpha1.AnnotationObjectHash] {
		t.Fatal("scaling needs no detachment: replicas stay out of the hash")
	}
}

func TestHealthChecker(t *testing.T) {
	ds := HealthChecker(ids(), "sluice:dev")
	if ds.Name != "edge-10080" || !ds.Spec.Template.Spec.HostNetwork || ds.Spec.Template.Spec.NodeSelector["role"] != "edge" {
		t.Fatalf("daemonset: %s %+v", ds.Name, ds.Spec.Template.Spec)
	}
	c := ds.Spec.Template.Spec.Containers[0]
	if c.Image != "sluice:dev" || c.Args[0] != "node-health" || !slices.Contains(c.Args, "--selector=sluice.dev/ingress-daemonset=edge") {
		t.Fatalf("container: %+v", c)
	}
	ps, cs := ds.Spec.Template.Spec.SecurityContext, c.SecurityContext
	if ps == nil || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || !*ps.RunAsNonRoot ||
		cs == nil || *cs.AllowPrivilegeEscalation || !*cs.RunAsNonRoot || !slices.Equal(cs.Capabilities.Drop, []corev1.Capability{"ALL"}) || cs.Capabilities.Add != nil {
		t.Fatalf("not restricted: pod %+v container %+v", ps, cs)
	}
	low := HealthChecker(ids(func(x *v1alpha1.IngressDaemonSet) { x.Spec.HealthCheckNodePort = 80 }), "")
	if add := low.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities.Add; !slices.Equal(add, []corev1.Capability{"NET_BIND_SERVICE"}) {
		t.Fatalf("port 80 adds %v, want NET_BIND_SERVICE", add)
	}
	if HealthChecker(ids(func(x *v1alpha1.IngressDaemonSet) { x.Spec.HealthCheckNodePort = 0 }), "") != nil {
		t.Fatal("no port, no health checker")
	}
}

func TestComputeProblems(t *testing.T) {
	long := node(strings.Repeat("n", 70))
	p := Compute(Input{IDS: ids(), Nodes: []*corev1.Node{long}, Now: now})
	if len(p.Create) != 0 || len(p.Problems) != 1 {
		t.Fatalf("a node name too long for a label: create %v, problems %v", names(p.Create), p.Problems)
	}
}

func TestComputeReadinessGateProblem(t *testing.T) {
	x := ids(func(x *v1alpha1.IngressDaemonSet) {
		x.Spec.Template.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: v1alpha1.ReadinessGateHealthy}}
	})
	p := Compute(Input{IDS: x, Nodes: []*corev1.Node{node("a")}, Now: now})
	if len(p.Problems) != 1 || !strings.Contains(p.Problems[0], "readiness gate") {
		t.Fatalf("problems = %v", p.Problems)
	}
}
