//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/test/load"
)

// The routing-feature cases of TestGateway (issue 26): header, query and
// method matches; a weight shift under load; revoking a ReferenceGrant
// under load. A second echo app (echoGWV2) in gw-a is the other backend.
const (
	echoGWV2     = "echo-gwv2"
	gwMatchHost  = "matches.gw.test"
	gwShiftHost  = "shift.gw.test"
	gwShiftSteps = 10
)

// createRouteApps makes the second app and the routes of these cases; it
// runs in create, before the canary route.
func (g *gatewaySuite) createRouteApps() {
	ctx := context.Background()
	g.e.create(echoApp(gwA, echoGWV2, 1, map[string]string{"app": echoGWV2, "app.kubernetes.io/name": echoGWV2})[1:]...)
	g.must(g.cl.Create(ctx, matchesRoute()))
	g.must(g.cl.Create(ctx, shiftRoute(0)))
	g.e.settled(gwA, echoGWV2, 3*time.Minute)
}

func backendRef(svc string, weight int32) gatewayv1.HTTPBackendRef {
	port := gatewayv1.PortNumber(80)
	return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{Weight: &weight,
		BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(svc), Port: &port}}}
}

func gwParent() []gatewayv1.ParentReference {
	ns := gatewayv1.Namespace(gwA)
	return []gatewayv1.ParentReference{{Name: gwName, Namespace: &ns}}
}

// matchesRoute sends to echoGWV2 the requests with header X-Version: two,
// with query v=2 (or v matching "two|2b"), and POSTs under /submit; the
// others to echoGWA.
func matchesRoute() *gatewayv1.HTTPRoute {
	regex := gatewayv1.QueryParamMatchRegularExpression
	post := gatewayv1.HTTPMethodPost
	prefix := gatewayv1.PathMatchPathPrefix
	submit := "/submit"
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: gwA, Name: "matches"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: gwParent()},
			Hostnames:       []gatewayv1.Hostname{gwMatchHost},
			Rules: []gatewayv1.HTTPRouteRule{
				{BackendRefs: []gatewayv1.HTTPBackendRef{backendRef(echoGWA, 1)}},
				{Matches: []gatewayv1.HTTPRouteMatch{
					{Headers: []gatewayv1.HTTPHeaderMatch{{Name: "x-version", Value: "two"}}},
					{QueryParams: []gatewayv1.HTTPQueryParamMatch{{Name: "v", Value: "2"}}},
					{QueryParams: []gatewayv1.HTTPQueryParamMatch{{Name: "v", Type: &regex, Value: "two|2b"}}},
					{Method: &post, Path: &gatewayv1.HTTPPathMatch{Type: &prefix, Value: &submit}},
				}, BackendRefs: []gatewayv1.HTTPBackendRef{backendRef(echoGWV2, 1)}},
			},
		},
	}
}

// shiftRoute gives echoGWV2 step tenths of the requests of gwShiftHost,
// echoGWA the rest; its rule for Exact /step-N answers from echoGWA, so a
// proxy serving /step-N has this step's weights.
func shiftRoute(step int) *gatewayv1.HTTPRoute {
	exact := gatewayv1.PathMatchExact
	marker := fmt.Sprintf("/step-%d", step)
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: gwA, Name: "shift"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: gwParent()},
			Hostnames:       []gatewayv1.Hostname{gwShiftHost},
			Rules: []gatewayv1.HTTPRouteRule{
				{BackendRefs: []gatewayv1.HTTPBackendRef{backendRef(echoGWA, int32(gwShiftSteps-step)), backendRef(echoGWV2, int32(step))}},
				{Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: &exact, Value: &marker}}},
					BackendRefs: []gatewayv1.HTTPBackendRef{backendRef(echoGWA, 1)}},
			},
		},
	}
}

// request sends one request with method, target and extra header lines
// for host through the load balancer.
func (g *gatewaySuite) request(method, host, target string, header ...string) (answer, error) {
	conn, err := net.DialTimeout("tcp", g.lb(), 5*time.Second)
	if err != nil {
		return answer{}, err
	}
	defer conn.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, target, host)
	for _, h := range header {
		b.WriteString(h + "\r\n")
	}
	if method == http.MethodPost {
		b.WriteString("Content-Length: 0\r\n")
	}
	b.WriteString("\r\n")
	return send(conn, b.String())
}

// matches: each kind of request is answered by the backend its match
// names; wrong counts the others.
func (g *gatewaySuite) matches() (int, int, string) {
	type probe struct {
		method, target string
		header         []string
		want           string
	}
	probes := []probe{
		{"GET", "/", nil, echoGWA},
		{"GET", "/x", []string{"X-Version: two"}, echoGWV2},
		{"GET", "/x", []string{"x-version: three"}, echoGWA},
		{"GET", "/x?v=2", nil, echoGWV2},
		{"GET", "/x?v=2b&v=1", nil, echoGWV2},
		{"GET", "/x?v=22", nil, echoGWA},
		{"POST", "/submit/form", nil, echoGWV2},
		{"GET", "/submit/form", nil, echoGWA},
		{"POST", "/other", nil, echoGWA},
	}
	tn := &tenancy{e: g.e}
	for _, ip := range tn.podIPs(proxyNS, proxyName) {
		tn.until(net.JoinHostPort(ip, "8080"), gwMatchHost, "/x?v=2", 200, echoGWV2)
	}
	n, wrong := 0, 0
	for i := range gwProbes {
		p := probes[i%len(probes)]
		a, err := g.request(p.method, gwMatchHost, p.target, p.header...)
		n++
		if err != nil || a.status != 200 || !a.from(p.want) {
			wrong++
			g.e.t.Logf("%s %s %v: %v %v, want 200 from %s", p.method, p.target, p.header, a, err, p.want)
		}
	}
	return n, wrong, fmt.Sprintf("kinds=%d wrong=%d", len(probes), wrong)
}

// weightShift moves gwShiftHost from echoGWA to echoGWV2 in gwShiftSteps
// steps under load; after each step has reached every proxy, gwProbes
// requests measure echoGWV2's share. Weight 0 takes no request: the first
// and last shares are exact.
func (g *gatewaySuite) weightShift() string {
	e := g.e
	tn := &tenancy{e: e}
	proxies := tn.podIPs(proxyNS, proxyName)
	var shares []string
	for step := 0; step <= gwShiftSteps; step++ {
		want := shiftRoute(step)
		e.eventually(time.Minute, "updating the shift route", func(ctx context.Context) (bool, error) {
			var cur gatewayv1.HTTPRoute
			if err := g.cl.Get(ctx, client.ObjectKey{Namespace: gwA, Name: "shift"}, &cur); err != nil {
				return false, err
			}
			cur.Spec = want.Spec
			err := g.cl.Update(ctx, &cur)
			return err == nil, ignoreConflict(err)
		})
		for _, ip := range proxies {
			tn.until(net.JoinHostPort(ip, "8080"), gwShiftHost, fmt.Sprintf("/step-%d", step), 200, echoGWA)
		}
		v2 := 0
		for range gwProbes {
			a, err := get(g.lb(), gwShiftHost, "/")
			switch {
			case err != nil || a.status != 200:
				e.t.Errorf("step %d: %v %v", step, a, err)
			case a.from(echoGWV2):
				v2++
			case !a.from(echoGWA):
				e.t.Errorf("step %d: answered by %q", step, a.echo)
			}
		}
		pct := 100 * v2 / gwProbes
		shares = append(shares, fmt.Sprintf("%d", pct))
		e.t.Logf("gateway-weight-shift step %d: weights %d/%d, %s share %d%%", step, gwShiftSteps-step, step, echoGWV2, pct)
		exp := 100 * step / gwShiftSteps
		if (step == 0 || step == gwShiftSteps) && pct != exp || pct < exp-25 || pct > exp+25 {
			e.t.Errorf("step %d: %s share %d%%, want about %d%%", step, echoGWV2, pct, exp)
		}
	}
	return "v2_share_per_step=" + strings.Join(shares, ",")
}

func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// refGrantRevoke deletes the ReferenceGrant gw-a's cross route needs, under
// load on gw-a's own host: the cross rule answers 500 from the proxy (never
// gw-b's Service) and says RefNotPermitted; nothing else changes (the load
// of the app host loses nothing). The grant is made first if an earlier
// case did not.
func (g *gatewaySuite) refGrantRevoke() string {
	e := g.e
	ctx := context.Background()
	grant := crossGrant()
	if err := g.cl.Create(ctx, grant); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
	tn := &tenancy{e: e}
	proxies := tn.podIPs(proxyNS, proxyName)
	for _, ip := range proxies {
		tn.until(net.JoinHostPort(ip, "8080"), gwCrossHost, "/", 200, echoGWB)
	}
	g.must(g.cl.Delete(ctx, crossGrant()))
	g.routeCondition(gwA, "cross", "ResolvedRefs", metav1.ConditionFalse, "RefNotPermitted")
	for _, ip := range proxies {
		tn.until(net.JoinHostPort(ip, "8080"), gwCrossHost, "/", 500, "")
	}
	n, f := g.probe(gwCrossHost, func(a answer) bool { return a.status == 500 && a.from("") })
	if f != 0 {
		e.t.Errorf("gateway-refgrant-revoke: %d of %d requests for the cross rule not refused with 500", f, n)
	}
	m, mf := g.probe(gwAppHost, func(a answer) bool { return a.status == 200 && a.from(echoGWA) })
	if mf != 0 {
		e.t.Errorf("gateway-refgrant-revoke: %d of %d requests for the app host failed", mf, m)
	}
	return fmt.Sprintf("cross_refused=%d app_served=%d", n-f, m-mf)
}

func crossGrant() *gatewayv1.ReferenceGrant {
	return &gatewayv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: gwB, Name: "from-gw-a"},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gwA}},
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		},
	}
}

// routeCases runs the routing-feature cases.
func (g *gatewaySuite) routeCases(cs *cases) {
	e := g.e
	if cs.wants("gateway-matches") {
		g.line("gateway-matches", g.matches)
	}
	e.loadOpts = func(o *load.Options) {
		o.Host = gwShiftHost
		o.Check = func(r *http.Response) error {
			if n := r.Header.Get("X-Echo-Name"); !strings.HasPrefix(n, echoGWA+"-") && !strings.HasPrefix(n, echoGWV2+"-") {
				return fmt.Errorf("answered by %q, want %s or %s", n, echoGWA, echoGWV2)
			}
			return nil
		}
	}
	cs.runNoted("gateway-weight-shift", g.weightShift)
	e.loadOpts = func(o *load.Options) { o.Host, o.Check = gwAppHost, load.FromEcho(echoGWA+"-") }
	cs.runNoted("gateway-refgrant-revoke", g.refGrantRevoke)
	if cs.wants("gateway-grpc") {
		g.line("gateway-grpc", g.grpcRoute) // gateway_grpc_test.go
	}
}
