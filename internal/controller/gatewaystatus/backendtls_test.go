package gatewaystatus_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/gateway"
	"sluice.dev/sluice/internal/testcert"
)

// TestBackendTLSPolicies: with BackendTLSPolicies served, a policy whose
// target Service a route attached to Gateway infra/web uses gets sluice's
// ancestor entry for that Gateway (NoValidCACertificate while its CA
// ConfigMap is missing, Accepted once it holds a certificate), beside
// another controller's entry, which is kept; without, nothing is written.
func TestBackendTLSPolicies(t *testing.T) {
	for _, served := range []bool{true, false} {
		theirs := gatewayv1.PolicyAncestorStatus{ControllerName: "example.com/other", AncestorRef: gatewayv1.ParentReference{Name: "theirs"},
			Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: metav1.Unix(1, 0)}}}
		pol := securePolicy()
		pol.Status.Ancestors = []gatewayv1.PolicyAncestorStatus{theirs}
		c, r := newReconciler(t, append(fixtures(), secureRoute(), pol, secureService())...)
		r.ServeBackendTLSPolicies(served)
		reconcileAndGet := func() []gatewayv1.PolicyAncestorStatus {
			t.Helper()
			var got gatewayv1.BackendTLSPolicy
			reconcileGet(t, r, c, client.ObjectKey{Namespace: "team-a", Name: "secure"}, &got)
			return got.Status.Ancestors
		}
		anc := reconcileAndGet()
		if !served {
			if len(anc) != 1 || anc[0].ControllerName != "example.com/other" {
				t.Errorf("BackendTLSPolicies not served: ancestors %+v, want only the other controller's", anc)
			}
			continue
		}
		if len(anc) != 2 || anc[0].ControllerName != "example.com/other" {
			t.Fatalf("ancestors = %+v, want the other controller's and ours", anc)
		}
		ours := anc[1]
		if ours.ControllerName != gateway.ControllerName || ours.AncestorRef.Name != "web" || ours.AncestorRef.Namespace == nil || *ours.AncestorRef.Namespace != "infra" ||
			ours.AncestorRef.Kind == nil || *ours.AncestorRef.Kind != "Gateway" {
			t.Errorf("our ancestor = %+v", ours)
		}
		if cd := condition(t, ours.Conditions, "Accepted"); cd.Status != metav1.ConditionFalse || cd.Reason != "NoValidCACertificate" {
			t.Errorf("Accepted = %+v", cd)
		}
		if cd := condition(t, ours.Conditions, "ResolvedRefs"); cd.Status != metav1.ConditionFalse || cd.Reason != "InvalidCACertificateRef" {
			t.Errorf("ResolvedRefs = %+v", cd)
		}

		ca, _ := testcert.SelfSigned(t, "ca")
		if err := c.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ca"}, Data: map[string]string{gateway.CAKey: string(ca)}}); err != nil {
			t.Fatal(err)
		}
		anc = reconcileAndGet()
		if len(anc) != 2 {
			t.Fatalf("ancestors = %+v", anc)
		}
		for _, typ := range []string{"Accepted", "ResolvedRefs"} {
			if cd := condition(t, anc[1].Conditions, typ); cd.Status != metav1.ConditionTrue {
				t.Errorf("%s = %+v, want True", typ, cd)
			}
		}
	}
}

// secureRoute is an HTTPRoute attached to infra/web whose backend is
// Service team-a/secure (secureService), port 443.
func secureRoute() *gatewayv1.HTTPRoute {
	return &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "secure"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "web", Namespace: ptr(gatewayv1.Namespace("infra"))}}},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
				Name: "secure", Port: ptr(gatewayv1.PortNumber(443))}}}}}},
		}}
}

func secureService() *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "secure"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}
}

// securePolicy is a BackendTLSPolicy for Service team-a/secure whose CA is
// ConfigMap team-a/ca.
func securePolicy() *gatewayv1.BackendTLSPolicy {
	return &gatewayv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "secure"},
		Spec: gatewayv1.BackendTLSPolicySpec{
			TargetRefs: []gatewayv1.LocalPolicyTargetReferenceWithSectionName{{LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Kind: "Service", Name: "secure"}}},
			Validation: gatewayv1.BackendTLSPolicyValidation{Hostname: "secure.example.com",
				CACertificateRefs: []gatewayv1.LocalObjectReference{{Kind: "ConfigMap", Name: "ca"}}},
		}}
}
