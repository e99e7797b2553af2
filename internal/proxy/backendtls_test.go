package proxy

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/gateway"
	"sluice.dev/sluice/internal/route"
	"sluice.dev/sluice/internal/translate"
)

// TestBackendTLSPolicy: an HTTPRoute's backend that a BackendTLSPolicy
// targets is reached over TLS with the policy's hostname as SNI, verified
// against the CA of its ConfigMap (translated from the objects as the
// proxies do); a ConfigMap holding another CA fails the handshake (502),
// and a missing ConfigMap leaves the backend without endpoints (503):
// never plain HTTP.
func TestBackendTLSPolicy(t *testing.T) {
	cert, caPEM := testCert(t, "secure.internal.example.com")
	_, otherCA := testCert(t, "secure.internal.example.com")
	port := tlsBackend(t, cert)

	p, front, c := front(t, Options{})
	for _, tc := range []struct {
		name   string
		ca     []byte // nil: no ConfigMap
		status int
		body   string
	}{
		{"policy CA", caPEM, 200, "secure.internal.example.com"},
		{"other CA", otherCA, 502, ""},
		{"missing ConfigMap", nil, 503, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := backendTLSInput(port, tc.ca)
			cfg, problems := translate.Build(in, translate.Options{AllowLoopbackEndpoints: true, AllowEndpointsWithoutPod: true,
				Gateway: &gateway.Options{GatewayClass: "sluice"}})
			if tc.ca != nil && len(problems) > 0 {
				t.Fatalf("problems: %v", problems)
			}
			p.Update(route.New(cfg))
			req, _ := http.NewRequest("GET", front.URL+"/", nil)
			req.Host = "app.example.com"
			r := do(t, c, req)
			if r.status != tc.status || tc.body != "" && r.body != tc.body {
				t.Errorf("got %d %q, want %d %q", r.status, r.body, tc.status, tc.body)
			}
		})
	}
}

// tlsBackend starts an HTTPS server on loopback with cert that answers
// the server name its client sent, and returns its port; at the end of
// the test, a request that reached it in plain HTTP is an error.
func tlsBackend(t *testing.T, cert tls.Certificate) int32 {
	t.Helper()
	var plain atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			plain.Add(1)
			return
		}
		w.Write([]byte(r.TLS.ServerName))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	t.Cleanup(func() {
		srv.Close()
		if n := plain.Load(); n > 0 {
			t.Errorf("%d requests reached the backend in plain HTTP", n)
		}
	})
	_, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	return int32(port)
}

// backendTLSInput: an HTTPRoute to Service team-a/secure (one endpoint on
// 127.0.0.1:port) and a BackendTLSPolicy for it whose CA is the ConfigMap
// holding ca (none when nil).
func backendTLSInput(port int32, ca []byte) translate.Input {
	ns := ref(gatewayv1.Namespace("infra"))
	in := translate.Input{
		Services: []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "secure"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}},
		EndpointSlices: []*discoveryv1.EndpointSlice{{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "team-a", Name: "secure-1", Labels: map[string]string{discoveryv1.LabelServiceName: "secure"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ref("https"), Port: &port}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ref(true)}}},
		}},
		Gateway: translate.GatewayInput{
			GatewayClasses: []*gatewayv1.GatewayClass{{ObjectMeta: metav1.ObjectMeta{Name: "sluice"}, Spec: gatewayv1.GatewayClassSpec{ControllerName: gateway.ControllerName}}},
			Gateways: []*gatewayv1.Gateway{{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "web"}, Spec: gatewayv1.GatewaySpec{GatewayClassName: "sluice",
				Listeners: []gatewayv1.Listener{{Name: "http", Protocol: gatewayv1.HTTPProtocolType, Port: 80,
					AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ref(gatewayv1.NamespacesFromAll)}}}}}}},
			HTTPRoutes: []*gatewayv1.HTTPRoute{{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app"}, Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "web", Namespace: ns}}},
				Hostnames:       []gatewayv1.Hostname{"app.example.com"},
				Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
					BackendObjectReference: gatewayv1.BackendObjectReference{Name: "secure", Port: ref(gatewayv1.PortNumber(443))}}}}}},
			}}},
			BackendTLSPolicies: []*gatewayv1.BackendTLSPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "secure"},
				Spec: gatewayv1.BackendTLSPolicySpec{
					TargetRefs: []gatewayv1.LocalPolicyTargetReferenceWithSectionName{{LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Kind: "Service", Name: "secure"}}},
					Validation: gatewayv1.BackendTLSPolicyValidation{Hostname: "secure.internal.example.com",
						CACertificateRefs: []gatewayv1.LocalObjectReference{{Kind: "ConfigMap", Name: "ca"}}},
				}}},
		},
	}
	if ca != nil {
		in.Gateway.ConfigMaps = []*corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ca"}, Data: map[string]string{gateway.CAKey: string(ca)}}}
	}
	return in
}

func ref[T any](v T) *T { return &v }
