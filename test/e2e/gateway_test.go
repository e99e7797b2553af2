//go:build e2e

package e2e

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/test/load"
	"sluice.dev/sluice/test/testenv"
)

// The Gateway API suite's layout: a Gateway in namespace gw-a (labelled
// gateway-access=true) whose one HTTP listener allows routes from the
// namespaces with that label; an echo app in gw-a and one in gw-b (not
// labelled).
const (
	gwA, gwB     = "gw-a", "gw-b"
	echoGWA      = "echo-gwa"
	echoGWB      = "echo-gwb"
	gwName       = "web"
	gwAppHost    = "app.gw.test"      // gw-a's route to its own Service
	gwCrossHost  = "cross.gw.test"    // gw-a's route to gw-b's Service
	gwOutHost    = "outsider.gw.test" // gw-b's route, not allowed by the listener
	gwProbes     = 100                // requests per probe
	gwAccessKey  = "gateway-access"
	gwStatusWait = 2 * time.Minute
)

// TestGateway installs sluice with `helm install` (gatewayAPI.enabled,
// the standard-channel CRDs from the chart's gateway-api/ applied first)
// and checks, through HAProxy in front of the proxies:
//
//   - gateway-served: an HTTPRoute to a Service of its namespace is served
//     by that Service; the Gateway gets the binding's address and the
//     route Accepted;
//   - gateway-refgrant: a backendRef to another namespace's Service
//     without a ReferenceGrant is never served (500 from the proxy) and
//     says ResolvedRefs=False RefNotPermitted; with the grant it is served
//     by that Service;
//   - gateway-not-allowed: a route from a namespace the listener does not
//     allow is not attached (Accepted=False NotAllowedByListeners) and its
//     host is not served (404);
//   - gateway-matches: header, query and method matches answered by the
//     backend they name (wrong=0);
//   - gateway-weight-shift: an HTTPRoute shifted from one backend to
//     another in 10 weight steps under load: no request lost, the share
//     per step printed (0% and 100% exact);
//   - gateway-refgrant-revoke: the ReferenceGrant deleted under load on
//     another host: the cross-namespace rule answers 500, nothing else
//     changes;
//   - gateway-grpc: a GRPCRoute's method match served over HTTP/2 by a
//     gRPC app, an unmatched method refused;
//   - explain-gateway-healthy and explain-gateway-route-refused: `sluice
//     explain gateway` on a healthy Gateway, and on the suite's, which
//     names the route its listener refuses;
//   - gateway-backend-tls: a BackendTLSPolicy's backend answers over
//     TLS verified against the policy's CA ConfigMap; a subjectAltNames
//     URI the certificate lacks: 502, its own: answered; another CA: 502;
//     no ConfigMap: 503 and NoValidCACertificate;
//   - gateway-listener-add: a listener on an extra port added to the
//     Gateway and removed again under load on its port-80 host: the extra
//     port serves its route only while the listener exists, the load
//     loses nothing;
//   - gateway-proxy-roll: the proxies rolled (helm upgrade) under load on
//     the Gateway's host: no request lost.
//
// Each prints `e2e gateway-<case>: requests=N failed=F ...`.
func TestGateway(t *testing.T) {
	extraPort := testenv.FreePort(t, "127.0.0.1") // gateway-listener-add
	// SLUICE_E2E_GATEWAY_PREFIX: another cluster prefix, so a run of some
	// cases does not meet a whole-stage run of this suite.
	h := newChartEnv(t, cmp.Or(os.Getenv("SLUICE_E2E_GATEWAY_PREFIX"), "gw"), chartOptions{
		setup: func(e *env) string {
			installGatewayCRDs(e)
			// --h2c: gRPC clients (gateway-grpc) reach the proxies' HTTP
			// port. --proxy-protocol: HAProxy's extra-port frontend says
			// which port it served (gateway-listener-add); HAProxy
			// reaches the proxies from the cluster bridge.
			return fmt.Sprintf("proxy: {extraArgs: [--h2c, --proxy-protocol, --trusted-proxies=%s/32]}\n", e.c.BridgeIP())
		},
		haproxy: func(e *env) { e.lbBack += gwExtraFrontend(extraPort) },
		values:  fmt.Sprintf("gatewayAPI: {enabled: true, extraHTTPPorts: \"%d\"}\n", extraPort),
	})
	e := h.env
	g := newGatewaySuite(e)
	g.create()
	cs := newCases(e)

	if cs.wants("gateway-served") {
		g.line("gateway-served", g.served)
	}
	if cs.wants("gateway-refgrant") {
		g.line("gateway-refgrant", g.refGrant)
	}
	if cs.wants("gateway-not-allowed") {
		g.line("gateway-not-allowed", g.notAllowed)
	}
	g.routeCases(cs)   // gateway_routes_test.go
	g.explainCases(cs) // explain_test.go
	if cs.wants("gateway-backend-tls") {
		g.line("gateway-backend-tls", g.backendTLS) // gateway_backendtls_test.go
	}
	e.loadOpts = func(o *load.Options) { o.Host, o.Check = gwAppHost, load.FromEcho(echoGWA+"-") }
	cs.runNoted("gateway-listener-add", func() string { return g.listenerAdd(extraPort) }) // gateway_listener_test.go
	cs.run("gateway-proxy-roll", func() {
		h.helm(append(append([]string{"upgrade", release, h.chart, "-n", proxyNS}, h.valueFiles()...), "--set", "proxy.logLevel=debug")...)
		e.settled(proxyNS, proxyName, 4*time.Minute)
	})
}

// installGatewayCRDs applies the chart's gateway-api/*.yaml and waits
// until the API server serves the kinds.
func installGatewayCRDs(e *env) {
	e.t.Helper()
	files, err := filepath.Glob(filepath.Join(e.root, "deploy/helm/sluice/gateway-api/*.yaml"))
	if err != nil || len(files) != 6 {
		e.t.Fatalf("gateway-api CRDs: %v %v", files, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			e.t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&u.Object); err != nil {
			e.t.Fatalf("decoding %s: %v", f, err)
		}
		if err := e.cl.Create(context.Background(), u); err != nil {
			e.t.Fatalf("creating %s: %v", f, err)
		}
	}
	disco, err := discovery.NewDiscoveryClientForConfig(e.c.RESTConfig())
	if err != nil {
		e.t.Fatal(err)
	}
	e.eventually(time.Minute, "the Gateway API CRDs served", func(context.Context) (bool, error) {
		list, err := disco.ServerResourcesForGroupVersion(gatewayv1.GroupVersion.String())
		return err == nil && len(list.APIResources) >= 4, nil
	})
}

// gatewaySuite runs the cases on one env with a client that knows the
// Gateway API types.
type gatewaySuite struct {
	e  *env
	cl client.Client
}

func newGatewaySuite(e *env) *gatewaySuite {
	s := ct.Scheme()
	if err := gatewayv1.Install(s); err != nil {
		e.t.Fatal(err)
	}
	cl, err := client.New(e.c.RESTConfig(), client.Options{Scheme: s})
	if err != nil {
		e.t.Fatal(err)
	}
	return &gatewaySuite{e: e, cl: cl}
}

// line runs a probe case and prints its summary line; failed must be 0.
func (g *gatewaySuite) line(name string, c func() (requests, failed int, note string)) {
	t := g.e.t
	n, f, note := c()
	l := fmt.Sprintf("e2e %s: requests=%d failed=%d %s", name, n, f, note)
	t.Log(l)
	writeSummary([]string{l})
	if n == 0 || f != 0 {
		t.Errorf("%s: %d of %d requests failed", name, f, n)
	}
}

func (g *gatewaySuite) lb() string { return fmt.Sprintf("127.0.0.1:%d", g.e.lbPort) }

// probe sends gwProbes requests for host through HAProxy and counts those
// ok does not accept.
func (g *gatewaySuite) probe(host string, ok func(answer) bool) (requests, failed int) {
	for range gwProbes {
		a, err := get(g.lb(), host, "/")
		requests++
		if err != nil || !ok(a) {
			failed++
			g.e.t.Logf("%s: %v %v", host, a, err)
		}
	}
	return requests, failed
}

func (g *gatewaySuite) must(err error) {
	g.e.t.Helper()
	if err != nil {
		g.e.t.Fatal(err)
	}
}

// create makes both namespaces' apps, the Gateway and the three routes,
// then a canary route after them, and waits until every proxy serves the
// canary: the proxies have seen the routes before it.
func (g *gatewaySuite) create() {
	e := g.e
	ctx := context.Background()
	g.must(g.cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gwA, Labels: map[string]string{gwAccessKey: "true"}}}))
	g.must(g.cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gwB}}))
	e.create(echoApp(gwA, echoGWA, 1, map[string]string{"app": echoGWA, "app.kubernetes.io/name": echoGWA})[1:]...)
	e.create(echoApp(gwB, echoGWB, 1, map[string]string{"app": echoGWB, "app.kubernetes.io/name": echoGWB})[1:]...)
	from := gatewayv1.NamespacesFromSelector
	g.must(g.cl.Create(ctx, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: gwA, Name: gwName},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "sluice", Listeners: []gatewayv1.Listener{{
			Name: "http", Protocol: gatewayv1.HTTPProtocolType, Port: 80,
			AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &from,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{gwAccessKey: "true"}}}},
		}}},
	}))
	g.must(g.cl.Create(ctx, httpRoute(gwA, "app", gwAppHost, "", echoGWA)))
	g.must(g.cl.Create(ctx, httpRoute(gwA, "cross", gwCrossHost, gwB, echoGWB)))
	g.must(g.cl.Create(ctx, httpRoute(gwB, "outsider", gwOutHost, "", echoGWB)))
	g.createRouteApps() // gateway_routes_test.go
	e.settled(gwA, echoGWA, 3*time.Minute)
	e.settled(gwB, echoGWB, 3*time.Minute)
	g.must(g.cl.Create(ctx, httpRoute(gwA, "canary", "canary.gw.test", "", echoGWA)))
	tn := &tenancy{e: e}
	for _, ip := range tn.podIPs(proxyNS, proxyName) {
		tn.until(net.JoinHostPort(ip, "8080"), "canary.gw.test", "/", 200, echoGWA)
	}
}

// httpRoute is a route of namespace ns for host to Service svc (port 80)
// of namespace svcNS ("": ns), attached to the suite's Gateway.
func httpRoute(ns, name, host, svcNS, svc string) *gatewayv1.HTTPRoute {
	gwNS := gatewayv1.Namespace(gwA)
	port := gatewayv1.PortNumber(80)
	ref := gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
		Name: gatewayv1.ObjectName(svc), Port: &port}}}
	if svcNS != "" {
		n := gatewayv1.Namespace(svcNS)
		ref.Namespace = &n
	}
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: gwName, Namespace: &gwNS}}},
			Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(host)},
			Rules:           []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{ref}}},
		},
	}
}

// routeCondition waits until the route's parent entry of sluice has
// condition typ with status and reason.
func (g *gatewaySuite) routeCondition(ns, name, typ string, status metav1.ConditionStatus, reason string) {
	g.e.t.Helper()
	g.e.eventually(gwStatusWait, fmt.Sprintf("HTTPRoute %s/%s %s=%s %s", ns, name, typ, status, reason), func(ctx context.Context) (bool, error) {
		var r gatewayv1.HTTPRoute
		if err := g.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &r); err != nil {
			return false, err
		}
		for _, p := range r.Status.Parents {
			if p.ControllerName != "sluice.dev/gateway-controller" {
				continue
			}
			c := meta.FindStatusCondition(p.Conditions, typ)
			return c != nil && c.Status == status && c.Reason == reason, nil
		}
		return false, nil
	})
}

func (g *gatewaySuite) served() (int, int, string) {
	e := g.e
	var addr string
	var attached int32
	e.eventually(gwStatusWait, "Gateway programmed with the binding's address", func(ctx context.Context) (bool, error) {
		var gw gatewayv1.Gateway
		if err := g.cl.Get(ctx, client.ObjectKey{Namespace: gwA, Name: gwName}, &gw); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(gw.Status.Conditions, "Programmed")
		if len(gw.Status.Addresses) == 0 || c == nil || c.Status != metav1.ConditionTrue || len(gw.Status.Listeners) != 1 {
			return false, nil
		}
		addr, attached = gw.Status.Addresses[0].Value, gw.Status.Listeners[0].AttachedRoutes
		return attached == 5, nil // app, cross, matches, shift, canary: not the outsider
	})
	g.routeCondition(gwA, "app", "Accepted", metav1.ConditionTrue, "Accepted")
	n, f := g.probe(gwAppHost, func(a answer) bool { return a.status == 200 && a.from(echoGWA) })
	return n, f, fmt.Sprintf("gateway_address=%s attached_routes=%d", addr, attached)
}

func (g *gatewaySuite) refGrant() (int, int, string) {
	e := g.e
	g.routeCondition(gwA, "cross", "ResolvedRefs", metav1.ConditionFalse, "RefNotPermitted")
	// Without the grant: the proxy answers 500 (an invalid backendRef),
	// never gw-b's Service.
	n1, f1 := g.probe(gwCrossHost, func(a answer) bool { return a.status == 500 && a.from("") })
	g.must(g.cl.Create(context.Background(), crossGrant()))
	g.routeCondition(gwA, "cross", "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs")
	tn := &tenancy{e: e}
	for _, ip := range tn.podIPs(proxyNS, proxyName) {
		tn.until(net.JoinHostPort(ip, "8080"), gwCrossHost, "/", 200, echoGWB)
	}
	n2, f2 := g.probe(gwCrossHost, func(a answer) bool { return a.status == 200 && a.from(echoGWB) })
	return n1 + n2, f1 + f2, fmt.Sprintf("refused_without_grant=%d served_with_grant=%d", n1-f1, n2-f2)
}

func (g *gatewaySuite) notAllowed() (int, int, string) {
	g.routeCondition(gwB, "outsider", "Accepted", metav1.ConditionFalse, "NotAllowedByListeners")
	n, f := g.probe(gwOutHost, func(a answer) bool { return a.status == 404 && a.from("") })
	return n, f, fmt.Sprintf("refused=%d", n-f)
}
