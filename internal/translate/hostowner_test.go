package translate

import (
	"testing"
)

// TestHostOwnership: an HTTPRoute attached to a Gateway of another class
// of ours (another fleet's) owns its host against a newer Ingress of
// another namespace, for the proxy of either class and for the controller
// (every class); the proxy's Build refuses the Ingress's rule as
// HostOwnership says.
func TestHostOwnership(t *testing.T) {
	in, opts, err := decodeObjects([]byte(`
kind: GatewayOptions
gatewayClass: fleet-a
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: fleet-a}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: fleet-b}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: b, namespace: infra}
spec:
  gatewayClassName: fleet-b
  listeners: [{name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: team-a, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  parentRefs: [{name: b, namespace: infra}]
  hostnames: [shop.example.com]
  rules: [{backendRefs: [{name: app, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: detached, namespace: team-c, creationTimestamp: "2025-01-01T00:00:00Z"}
spec:
  parentRefs: [{name: nope, namespace: infra}]
  hostnames: [free.example.com]
  rules: [{backendRefs: [{name: app, port: 80}]}]
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: sluice}
spec: {controller: sluice.dev/ingress-controller}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: late, namespace: team-b, creationTimestamp: "2026-02-01T00:00:00Z"}
spec:
  ingressClassName: sluice
  rules:
  - host: shop.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 80}}}}]}
  - host: free.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 80}}}}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	every := opts
	g := *opts.Gateway
	g.GatewayClass = ""
	every.Gateway = &g
	for name, o := range map[string]Options{"proxy of fleet-a": opts, "controller": every} {
		own := HostOwnership(in, o)
		if got := own.Owner("shop.example.com"); got != "team-a" {
			t.Errorf("%s: shop.example.com owned by %q, want team-a (the older attached route)", name, got)
		}
		if got := own.Owner("free.example.com"); got != "team-b" {
			t.Errorf("%s: free.example.com owned by %q, want team-b (a detached route claims nothing)", name, got)
		}
	}
	if own := HostOwnership(in, Options{Gateway: nil}); own.Owner("shop.example.com") != "team-b" {
		t.Errorf("without Gateway API: shop.example.com owned by %q, want team-b", own.Owner("shop.example.com"))
	}
	if own := HostOwnership(in, Options{Gateway: opts.Gateway, HostOwnership: HostOwnershipNone}); own.Owner("shop.example.com") != "" {
		t.Errorf("ownership off: owner %q", own.Owner("shop.example.com"))
	}
	cfg, ps := Build(in, opts)
	for _, vh := range cfg.VirtualHosts {
		if vh.Host == "shop.example.com" {
			t.Errorf("fleet-a serves shop.example.com from %s; the host is owned by team-a's route of fleet-b", vh.Routes[0].Ingress)
		}
	}
	refused := false
	for _, p := range ps {
		refused = refused || p.Kind == "Ingress" && p.Name == "late" && p.Reason == ReasonHostOwnedElsewhere
	}
	if !refused {
		t.Errorf("no HostOwnedElsewhere problem for team-b/late: %v", ps)
	}
}
