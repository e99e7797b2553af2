package gatewaystatus_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/api/v1alpha1"
	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/controller/gatewaystatus"
	"sluice.dev/sluice/internal/gateway"
)

// TestBackendTLSPolicies: with BackendTLSPolicies served, a policy whose
// target Service a route attached to Gateway infra/web uses gets sluice's
// ancestor entry for that Gateway (NoValidCACertificate while its CA
// ConfigMap is missing, Accepted once it holds a certificate), beside
// another controller's entry, which is kept; without, nothing is written.
func TestBackendTLSPolicies(t *testing.T) {
	for _, served := range []bool{true, false} {
		s := ct.Scheme()
		if err := gatewayv1.Install(s); err != nil {
			t.Fatal(err)
		}
		route := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "secure"},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "web", Namespace: ptr(gatewayv1.Namespace("infra"))}}},
				Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
					Name: "secure", Port: ptr(gatewayv1.PortNumber(443))}}}}}},
			}}
		theirs := gatewayv1.PolicyAncestorStatus{ControllerName: "example.com/other", AncestorRef: gatewayv1.ParentReference{Name: "theirs"},
			Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: metav1.Unix(1, 0)}}}
		pol := &gatewayv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "secure"},
			Spec: gatewayv1.BackendTLSPolicySpec{
				TargetRefs: []gatewayv1.LocalPolicyTargetReferenceWithSectionName{{LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Kind: "Service", Name: "secure"}}},
				Validation: gatewayv1.BackendTLSPolicyValidation{Hostname: "secure.example.com",
					CACertificateRefs: []gatewayv1.LocalObjectReference{{Kind: "ConfigMap", Name: "ca"}}},
			},
			Status: gatewayv1.PolicyStatus{Ancestors: []gatewayv1.PolicyAncestorStatus{theirs}}}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "secure"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}
		c := fake.NewClientBuilder().WithScheme(s).
			WithStatusSubresource(&gatewayv1.GatewayClass{}, &gatewayv1.Gateway{}, &gatewayv1.HTTPRoute{}, &gatewayv1.BackendTLSPolicy{}, &v1alpha1.LoadBalancerBinding{}).
			WithObjects(append(fixtures(), route, pol, svc)...).Build()
		r, err := gatewaystatus.New(gatewaystatus.Options{Client: c, Namespace: "sluice-system"})
		if err != nil {
			t.Fatal(err)
		}
		r.ServeBackendTLSPolicies(served)
		ctx := context.Background()
		reconcileAndGet := func() []gatewayv1.PolicyAncestorStatus {
			t.Helper()
			if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
				t.Fatal(err)
			}
			var got gatewayv1.BackendTLSPolicy
			if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "secure"}, &got); err != nil {
				t.Fatal(err)
			}
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

		if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ca"}, Data: map[string]string{gateway.CAKey: testCA(t)}}); err != nil {
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

// testCA is a self-signed CA certificate (PEM).
func testCA(t *testing.T) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
