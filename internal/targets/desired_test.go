package targets

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"sluice.dev/sluice/internal/lb"
)

// Tiny constructors, Contour style.

type podOpt func(*corev1.Pod)

func pod(name, node, ip string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ingress", Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "proxy", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "admin", ContainerPort: 9090}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func deleting(p *corev1.Pod) { t := metav1.Now(); p.DeletionTimestamp = &t }
func phase(ph corev1.PodPhase) podOpt {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}
func readyContainers(p *corev1.Pod) {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue})
}
func notReady(p *corev1.Pod) {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse})
}

type nodeOpt func(*corev1.Node)

func node(name, zone, ip string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelZone: zone}},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///" + zone + "/i-" + name},
	}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func excludeLabel(n *corev1.Node) { n.Labels[LabelExcludeFromLB] = "" }
func toBeDeleted(n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintToBeDeleted, Effect: corev1.TaintEffectNoSchedule})
}
func karpenterDisrupting(n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintKarpenterDisruption, Value: TaintKarpenterDisrupting, Effect: corev1.TaintEffectNoSchedule})
}
func karpenterOtherValue(n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintKarpenterDisruption, Value: "candidate", Effect: corev1.TaintEffectNoSchedule})
}
func cordoned(n *corev1.Node) {
	n.Spec.Unschedulable = true
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
}
func nodeDeleting(n *corev1.Node) { t := metav1.Now(); n.DeletionTimestamp = &t }
func noProviderID(n *corev1.Node) { n.Spec.ProviderID = "" }

func nodeMap(ns ...*corev1.Node) map[string]*corev1.Node {
	m := map[string]*corev1.Node{}
	for _, n := range ns {
		m[n.Name] = n
	}
	return m
}

// dump renders targets and problems one per line for comparison.
func dump(ts []lb.Target, ps []Problem) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "%s zone=%s id=%s\n", t.Address, t.Zone, t.ID)
	}
	for _, p := range ps {
		fmt.Fprintf(&b, "problem: %s\n", p)
	}
	return b.String()
}

func TestDesiredIP(t *testing.T) {
	nodes := nodeMap(
		node("a", "z1", "10.0.1.1"),
		node("b", "z2", "10.0.1.2", cordoned),
		node("c", "z1", "10.0.1.3", excludeLabel),
		node("d", "z2", "10.0.1.4", toBeDeleted),
		node("e", "z2", "10.0.1.5", nodeDeleting),
	)
	for _, tc := range []struct {
		name string
		spec Spec
		pods []*corev1.Pod
		want string
	}{{
		name: "pods in every state",
		spec: Spec{Port: intstr.FromInt32(8080)},
		pods: []*corev1.Pod{
			pod("running", "a", "10.244.1.5"),
			pod("not-ready-yet", "a", "10.244.1.6", notReady), // registered early: the LB health decides
			pod("pending-no-ip", "a", ""),
			pod("unscheduled", "", ""),
			pod("terminating", "a", "10.244.1.7", deleting),
			pod("succeeded", "a", "10.244.1.8", phase(corev1.PodSucceeded)),
			pod("failed", "a", "10.244.1.9", phase(corev1.PodFailed)),
			pod("on-cordoned", "b", "10.244.2.5"),
			pod("on-excluded", "c", "10.244.3.5"),
			pod("on-to-be-deleted", "d", "10.244.4.5"),
			pod("on-deleted-node", "e", "10.244.5.5"),
			pod("on-unknown-node", "x", "10.244.6.5"),
			pod("bad-ip", "a", "not-an-ip"),
			nil,
		},
		want: `10.244.1.5:8080 zone=z1 id=
10.244.1.6:8080 zone=z1 id=
10.244.2.5:8080 zone=z2 id=
10.244.6.5:8080 zone= id=
problem: Pod ingress/bad-ip: pod IP "not-an-ip" is not an IP address
`,
	}, {
		name: "named port, duplicates, IPv6, sorted",
		spec: Spec{Type: IP, Port: intstr.FromString("http")},
		pods: []*corev1.Pod{
			pod("v6", "a", "fd00::5"),
			pod("z", "a", "10.244.1.9"),
			pod("host-net-1", "a", "10.0.1.1"),
			pod("host-net-2", "a", "10.0.1.1"),
			pod("no-such-port", "a", "10.244.1.10", func(p *corev1.Pod) { p.Spec.Containers[0].Ports = nil }),
		},
		want: `10.0.1.1:8080 zone=z1 id=
10.244.1.9:8080 zone=z1 id=
[fd00::5]:8080 zone=z1 id=
problem: Pod ingress/no-such-port: no container port named "http"
`,
	}, {
		name: "bad port",
		spec: Spec{Port: intstr.FromInt32(0)},
		pods: []*corev1.Pod{pod("running", "a", "10.244.1.5")},
		want: "problem: Spec: port 0 out of range\n",
	}, {
		name: "unknown type",
		spec: Spec{Type: "Lambda", Port: intstr.FromInt32(80)},
		pods: []*corev1.Pod{pod("running", "a", "10.244.1.5")},
		want: "problem: Spec: unknown target type \"Lambda\"\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := dump(Desired(tc.spec, tc.pods, nodes))
			if got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestDesiredInstance(t *testing.T) {
	nodes := nodeMap(
		node("a", "z1", "10.0.1.1"),
		node("b", "z2", "10.0.1.2", cordoned),
		node("c", "z1", "10.0.1.3", excludeLabel),
		node("d", "z2", "10.0.1.4", toBeDeleted),
		node("f", "z3", ""),
		node("g", "z3", "10.0.1.7", noProviderID),
		node("h", "z1", "10.0.1.8"),
		node("k", "z1", "10.0.1.9", karpenterDisrupting),
		node("l", "z2", "10.0.1.10", karpenterOtherValue),
	)
	spec := Spec{Type: Instance, Port: intstr.FromInt32(30080)}
	pods := []*corev1.Pod{
		pod("a1", "a", "10.244.1.5", readyContainers),
		pod("a2", "a", "10.244.1.6", readyContainers),
		pod("b1", "b", "10.244.2.5", readyContainers),
		pod("c1", "c", "10.244.3.5", readyContainers),
		pod("d1", "d", "10.244.4.5", readyContainers),
		pod("f1", "f", "10.244.6.5", readyContainers),
		pod("g1", "g", "10.244.7.5", readyContainers),
		pod("h-not-ready", "h", "10.244.8.5", notReady),
		pod("h-no-conditions", "h", "10.244.8.6"),
		pod("h-terminating", "h", "10.244.8.7", readyContainers, deleting),
		pod("x1", "x", "10.244.9.5", readyContainers),
		pod("k1", "k", "10.244.10.5", readyContainers),
		pod("l1", "l", "10.244.11.5", readyContainers),
	}
	want := `10.0.1.7:30080 zone=z3 id=
10.0.1.1:30080 zone=z1 id=i-a
10.0.1.2:30080 zone=z2 id=i-b
10.0.1.10:30080 zone=z2 id=i-l
problem: Node f: no InternalIP address
`
	if got := dump(Desired(spec, pods, nodes)); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	// A named port makes no sense for nodes.
	_, ps := Desired(Spec{Type: Instance, Port: intstr.FromString("http")}, pods, nodes)
	if len(ps) != 1 || ps[0].Kind != "Spec" {
		t.Errorf("named instance port: %v", ps)
	}
}

func TestNodeTarget(t *testing.T) {
	inst := Spec{Type: Instance, Port: intstr.FromInt32(30080)}
	tests := []struct {
		name string
		spec Spec
		node *corev1.Node
		want string // "" when none
	}{
		{"instance", inst, node("a", "z1", "10.0.1.1"), "10.0.1.1:30080 zone=z1 id=i-a\n"},
		{"leaving node keeps its target", inst, node("d", "z2", "10.0.1.4", toBeDeleted), "10.0.1.4:30080 zone=z2 id=i-d\n"},
		{"no provider ID", inst, node("g", "z3", "10.0.1.7", noProviderID), "10.0.1.7:30080 zone=z3 id=\n"},
		{"no InternalIP", inst, node("f", "z3", ""), ""},
		{"unknown node", inst, nil, ""},
		{"IP spec", Spec{Type: IP, Port: intstr.FromInt32(8080)}, node("a", "z1", "10.0.1.1"), ""},
		{"named port", Spec{Type: Instance, Port: intstr.FromString("http")}, node("a", "z1", "10.0.1.1"), ""},
		{"check port", Spec{Type: Instance, Port: intstr.FromInt32(30080), CheckPort: 10254}, node("a", "z1", "10.0.1.1"), "10.0.1.1:30080 zone=z1 id=i-a check=10254\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got string
			if tg, ok := NodeTarget(tt.spec, tt.node); ok {
				got = dump([]lb.Target{tg}, nil)
				if tg.CheckPort != 0 {
					got = strings.TrimSuffix(got, "\n") + fmt.Sprintf(" check=%d\n", tg.CheckPort)
				}
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDesiredDeterministic(t *testing.T) {
	nodes := nodeMap(node("a", "z1", "10.0.1.1"))
	var pods []*corev1.Pod
	for i := 0; i < 50; i++ {
		pods = append(pods, pod(fmt.Sprint(i), "a", fmt.Sprintf("10.244.%d.%d", i%7, i)))
	}
	first, _ := Desired(Spec{Port: intstr.FromInt32(80)}, pods, nodes)
	slices.Reverse(pods)
	second, _ := Desired(Spec{Port: intstr.FromInt32(80)}, pods, nodes)
	if !slices.Equal(first, second) || len(first) != 50 {
		t.Fatalf("order depends on input: %v vs %v", first, second)
	}
	if !slices.IsSortedFunc(first, func(a, b lb.Target) int { return a.Compare(b) }) {
		t.Fatal("not sorted")
	}
}
