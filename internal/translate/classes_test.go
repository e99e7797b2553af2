package translate

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestClaimFilter: a fleet serves its own classes, but every class of
// ours claims hosts, so that a host's owner is the same on every fleet.
func TestClaimFilter(t *testing.T) {
	class := func(name, controller string, dflt bool) *networkingv1.IngressClass {
		c := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressClassSpec{Controller: controller}}
		if dflt {
			c.Annotations = map[string]string{annotationDefaultClass: "true"}
		}
		return c
	}
	classes := []*networkingv1.IngressClass{
		class("internal", ControllerName, false),
		class("internet", ControllerName, true),
		class("other", "example.com/other", false),
		class("named", "example.com/other", false),
	}
	ing := func(class string) *networkingv1.Ingress {
		i := &networkingv1.Ingress{}
		if class != "" {
			i.Spec.IngressClassName = &class
		}
		return i
	}
	for _, tc := range []struct {
		fleet          []string
		class          string
		serves, claims bool
	}{
		{[]string{"internal"}, "internal", true, true},
		{[]string{"internal"}, "internet", false, true},
		{[]string{"internal"}, "", false, true}, // the default class is ours
		{[]string{"internal"}, "other", false, false},
		{[]string{"internal", "named"}, "named", true, true}, // named by the fleet, whatever its controller
		{nil, "internet", true, true},
		{nil, "other", false, false},
	} {
		opts := Options{IngressClasses: tc.fleet}
		serves := NewClassFilter(classes, opts).Serves(ing(tc.class))
		claims := NewClaimFilter(classes, opts).Serves(ing(tc.class))
		if serves != tc.serves || claims != tc.claims {
			t.Errorf("fleet %v, class %q: serves=%v claims=%v, want %v %v", tc.fleet, tc.class, serves, claims, tc.serves, tc.claims)
		}
	}
}
