package admission

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	ct "sluice.dev/sluice/internal/controller/controllertest"
)

func podReview(t *testing.T, pod *corev1.Pod) []byte {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	r := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "u-2", Namespace: ct.Namespace, Operation: admissionv1.Create,
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Object: runtime.RawExtension{Raw: raw}},
	}
	b, _ := json.Marshal(r)
	return b
}

func TestSteerDecisions(t *testing.T) {
	h, c := twoZones(t) // zone-a: a1, a2 healthy; zone-b: b1 healthy, b2 initial
	s := &Steer{Client: c, Store: h.Store}
	surge := func(edit func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ct.Namespace, GenerateName: "proxy-new-",
			Labels: map[string]string{"app": "sluice", "pod-template-hash": "new"}}}
		if edit != nil {
			edit(p)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string // the zone patched in, "" none
	}{
		{"a rollout's first pod goes to the zone with the fewest healthy", surge(nil), "zone-b"},
		{"keeps the pod's own node selector", surge(func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }), "zone-b"},
		{"placed already", surge(func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{ZoneLabel: "zone-a"} }), ""},
		{"not made by a ReplicaSet", surge(func(p *corev1.Pod) { delete(p.Labels, "pod-template-hash") }), ""},
		{"no generateName", surge(func(p *corev1.Pod) { p.GenerateName, p.Name = "", "x" }), ""},
		{"no binding selects it", surge(func(p *corev1.Pod) { p.Labels["app"] = "other" }), ""},
		{"a revision only in zone-a (a1, a2): zone-b is short", surge(func(p *corev1.Pod) { p.GenerateName = "a" }), "zone-b"},
	} {
		code, out := post(t, s, podReview(t, tc.pod))
		if code != http.StatusOK || out.Response == nil || !out.Response.Allowed || out.Response.UID != "u-2" {
			t.Fatalf("%s: %d %+v", tc.name, code, out)
		}
		got := ""
		if p := out.Response.Patch; p != nil {
			var ops []struct {
				Path  string          `json:"path"`
				Value json.RawMessage `json:"value"`
			}
			if err := json.Unmarshal(p, &ops); err != nil || len(ops) != 2 || ops[0].Path != "/spec/nodeSelector" {
				t.Fatalf("%s: patch %s: %v", tc.name, p, err)
			}
			var sel map[string]string
			_ = json.Unmarshal(ops[0].Value, &sel)
			got = sel[ZoneLabel]
			for k, v := range tc.pod.Spec.NodeSelector {
				if sel[k] != v {
					t.Errorf("%s: the pod's node selector %s=%s lost: %v", tc.name, k, v, sel)
				}
			}
			if !strings.Contains(string(ops[1].Value), AnnotationSteered) {
				t.Errorf("%s: no annotation in %s", tc.name, p)
			}
		}
		if got != tc.want {
			t.Errorf("%s: steered to %q, want %q", tc.name, got, tc.want)
		}
	}
	// Garbage is answered 400 (the API server then fails open).
	if code, _ := post(t, s, []byte("{")); code != http.StatusBadRequest {
		t.Fatalf("garbage: %d", code)
	}
}

func FuzzSteer(f *testing.F) {
	f.Add([]byte(`{"request":{"uid":"u","operation":"CREATE","resource":{"resource":"pods"},"object":{"metadata":{"generateName":"x-","labels":{"pod-template-hash":"h","app":"sluice"}}}}}`))
	f.Add([]byte(`{"request":{"uid":"u","object":7}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		h, c := twoZones(t)
		s := &Steer{Client: c, Store: h.Store}
		code, out := post(t, s, body)
		if code == http.StatusOK && (out.Response == nil || !out.Response.Allowed) {
			t.Fatalf("a review answered without allowing: %+v", out)
		}
	})
}
