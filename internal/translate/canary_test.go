package translate

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// TestCanaryAlone: translated alone (the controller's status check, with
// Input.Ownership), a canary whose main route is out of view is not
// NotServed; in the full translation without a main route it is.
func TestCanaryAlone(t *testing.T) {
	can := fuzzIngress("canary", "a.example.com", "/", networkingv1.PathTypePrefix, "", 80)
	can.Annotations = map[string]string{AnnotationCanary: "true", AnnotationCanaryWeight: "10"}
	in := Input{Ingresses: []*networkingv1.Ingress{can}}
	_, ps := Build(in, Options{})
	if !Fatal(ps, "default", "canary") {
		t.Errorf("full translation: a canary without a main route is served: %v", ps)
	}
	in.Ownership = NewOwnership(in.Ingresses, "")
	_, ps = Build(in, Options{})
	if Fatal(ps, "default", "canary") {
		t.Errorf("translated alone: the canary is NotServed: %v", ps)
	}
}
