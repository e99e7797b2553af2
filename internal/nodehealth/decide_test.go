package nodehealth

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, annotations ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
	for i := 0; i+1 < len(annotations); i += 2 {
		n.Annotations[annotations[i]] = annotations[i+1]
	}
	return n
}

type podOpt func(*corev1.Pod)

func pod(name, nodeName string, ready bool, opts ...podOpt) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{NodeName: nodeName},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.ContainersReady, Status: st},
			// Ready (the readiness gate) must not matter.
			{Type: corev1.PodReady, Status: corev1.ConditionFalse},
		}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func deleting(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }
func failed(p *corev1.Pod)   { p.Status.Phase = corev1.PodFailed }

func TestDecide(t *testing.T) {
	def := Rules{DetachAnnotation: DefaultDetachAnnotation, DetachValue: DefaultDetachValue, UpdatePendingAnnotation: DefaultUpdatePendingAnnotation}
	anyValue := def
	anyValue.DetachValue = ""
	min1 := def
	min1.MinReady = 1
	min2 := def
	min2.MinReady = 2
	tests := []struct {
		name    string
		rules   Rules
		node    *corev1.Node
		pods    []*corev1.Pod
		healthy bool
		reason  string // substring
	}{
		{"unknown node", def, nil, []*corev1.Pod{pod("a", "n1", true)}, false, "node not found"},
		{"all ready", def, node("n1"), []*corev1.Pod{pod("a", "n1", true), pod("b", "n1", true)}, true, "ok: 2 of 2"},
		{"no replica", def, node("n1"), nil, false, "no replica"},
		{"only other nodes' pods", def, node("n1"), []*corev1.Pod{pod("a", "n2", true)}, false, "no replica"},
		{"one not ready", def, node("n1"), []*corev1.Pod{pod("a", "n1", true), pod("b", "n1", false)}, false, "1 of 2 replicas ready on node n1 (not ready: b)"},
		{"deleting pods do not count", def, node("n1"), []*corev1.Pod{pod("a", "n1", true), pod("b", "n1", false, deleting)}, true, "ok: 1 of 1"},
		{"only deleting pods", def, node("n1"), []*corev1.Pod{pod("a", "n1", true, deleting)}, false, "no replica"},
		{"finished pods do not count", def, node("n1"), []*corev1.Pod{pod("a", "n1", true), pod("b", "n1", false, failed)}, true, "ok: 1 of 1"},
		{"min-ready tolerates a starting surge pod", min1, node("n1"), []*corev1.Pod{pod("a", "n1", true), pod("b", "n1", false)}, true, "ok: 1 of 2"},
		{"min-ready not met", min2, node("n1"), []*corev1.Pod{pod("a", "n1", true), pod("b", "n1", false)}, false, "want at least 2"},
		{"detaching", def, node("n1", DefaultDetachAnnotation, "true"), []*corev1.Pod{pod("a", "n1", true)}, false, "being detached"},
		{"detach annotation other value", def, node("n1", DefaultDetachAnnotation, "false"), []*corev1.Pod{pod("a", "n1", true)}, true, "ok"},
		{"detach any value", anyValue, node("n1", DefaultDetachAnnotation, "2026-01-01T00:00:00Z"), []*corev1.Pod{pod("a", "n1", true)}, false, "being detached"},
		{"detach check off", Rules{}, node("n1", DefaultDetachAnnotation, "true", DefaultUpdatePendingAnnotation, "rev-2"), []*corev1.Pod{pod("a", "n1", true)}, true, "ok"},
		{"update pending", def, node("n1", DefaultUpdatePendingAnnotation, "rev-2"), []*corev1.Pod{pod("a", "n1", true)}, false, "update pending on node n1 (annotation sluice.dev/update-pending=rev-2)"},
		{"update pending false", def, node("n1", DefaultUpdatePendingAnnotation, "false"), []*corev1.Pod{pod("a", "n1", true)}, true, "ok"},
		{"update pending empty", def, node("n1", DefaultUpdatePendingAnnotation, ""), []*corev1.Pod{pod("a", "n1", true)}, true, "ok"},
		{"nil pod ignored", def, node("n1"), []*corev1.Pod{nil, pod("a", "n1", true)}, true, "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Decide(tt.rules, tt.node, tt.pods)
			if v.Healthy != tt.healthy || !strings.Contains(v.Reason, tt.reason) {
				t.Errorf("Decide = %+v, want healthy=%v with reason containing %q", v, tt.healthy, tt.reason)
			}
		})
	}
}
