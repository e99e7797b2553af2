package ingressstatus_test

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"sluice.dev/sluice/api/v1alpha1"
	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/controller/ingressstatus"
	"sluice.dev/sluice/internal/translate"
)

// TestServingIngressNginx: under --ingress-nginx-compat an Ingress of an
// ingress-nginx class gets the addresses of the controller's namespace
// binding (its class names none); without it, none.
func TestServingIngressNginx(t *testing.T) {
	b := ct.Binding("a")
	ngx := class("public-nginx", translate.IngressNginxController, false)
	ings := []*networkingv1.Ingress{ingress("by-class", className("public-nginx")), ingress("legacy", annotation("nginx"))}
	for _, compat := range []bool{true, false} {
		o := ingressstatus.ServingOptions{Namespace: ct.Namespace}
		if compat {
			o.IngressNginx = &translate.IngressNginx{}
		}
		s := ingressstatus.NewServing([]networkingv1.IngressClass{*ngx}, []v1alpha1.LoadBalancerBinding{*b}, o)
		for _, ing := range ings {
			if s.Serves(ing) != compat {
				t.Errorf("compat %v: %s served %v", compat, ing.Name, s.Serves(ing))
			}
		}
	}
}
