//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The extra listener port of TestGateway: HAProxy's frontend gwExtra on
// 127.0.0.1:port forwards to the proxies' plain port with a PROXY
// protocol header whose destination port is that port, and the proxies
// take it as an extra Gateway listener port (--gateway-extra-http-ports).
const (
	gwExtra     = "gw-extra"
	gwExtraHost = "extra.gw.test"
	gwExtraName = "extra" // the listener and its HTTPRoute
)

// gwExtraFrontend is the HAProxy configuration of the extra port's
// frontend and backend (HTTP mode, as the main one; its servers are added
// by listenerAdd, with send-proxy-v2).
func gwExtraFrontend(port int) string {
	return fmt.Sprintf(`
frontend fe-%[1]s
    bind 127.0.0.1:%[2]d
    default_backend %[1]s
backend %[1]s
    balance roundrobin
    option httpchk GET /healthz
`, gwExtra, port)
}

// listenerAdd, under load on the Gateway's port-80 host: before, the
// extra port serves nothing (404); a listener on it and an HTTPRoute
// attached by port are added, and once served there, gwProbes requests
// through it must reach the route's backend; then the listener is removed
// and the port answers 404 again. The load on port 80 loses nothing.
func (g *gatewaySuite) listenerAdd(port int) string {
	e := g.e
	ctx := context.Background()
	tn := &tenancy{e: e}
	for i, ip := range tn.podIPs(proxyNS, proxyName) {
		srv := fmt.Sprintf("%s/p%d", gwExtra, i)
		if out := e.lbCommand(fmt.Sprintf("add server %s %s send-proxy-v2 check inter 500ms", srv, net.JoinHostPort(ip, "8080"))); !strings.Contains(out, "New server registered") {
			e.t.Fatalf("adding %s to HAProxy: %s", srv, out)
		}
		e.lbCommand("enable server " + srv)
		e.lbCommand("enable health " + srv)
	}
	front := fmt.Sprintf("127.0.0.1:%d", port)
	status := func() int {
		a, err := get(front, gwExtraHost, "/")
		if err != nil {
			return 0
		}
		return a.status
	}
	e.eventually(time.Minute, "the extra port answering 404 before its listener exists", func(context.Context) (bool, error) {
		return status() == 404, nil
	})

	// The listener and a route attached to it by port.
	g.updateGateway(func(gw *gatewayv1.Gateway) {
		gw.Spec.Listeners = append(gw.Spec.Listeners, gatewayv1.Listener{Name: gwExtraName, Protocol: gatewayv1.HTTPProtocolType, Port: gatewayv1.PortNumber(port)})
	})
	rt := httpRoute(gwA, gwExtraName, gwExtraHost, gwA, echoGWA)
	p := gatewayv1.PortNumber(port)
	rt.Spec.ParentRefs[0].Port = &p
	g.must(g.cl.Create(ctx, rt))
	added := time.Now()
	e.eventually(2*time.Minute, "the extra port's route served", func(context.Context) (bool, error) {
		a, err := get(front, gwExtraHost, "/")
		return err == nil && a.status == 200 && a.from(echoGWA), nil
	})
	servedAfter := time.Since(added)
	ok, failed := 0, 0
	for range gwProbes {
		a, err := get(front, gwExtraHost, "/")
		if err != nil || a.status != 200 || !a.from(echoGWA) {
			failed++
			e.t.Logf("extra port: %v %v", a, err)
			continue
		}
		ok++
	}
	// The port-80 listener does not serve the extra route's host.
	if a, err := get(g.lb(), gwExtraHost, "/"); err != nil || a.status != 404 {
		e.t.Errorf("port 80 for %s: %v %v, want 404", gwExtraHost, a, err)
		failed++
	}

	// Remove the listener: the port serves nothing again.
	g.updateGateway(func(gw *gatewayv1.Gateway) {
		var keep []gatewayv1.Listener
		for _, l := range gw.Spec.Listeners {
			if l.Name != gwExtraName {
				keep = append(keep, l)
			}
		}
		gw.Spec.Listeners = keep
	})
	removed := time.Now()
	e.eventually(2*time.Minute, "the extra port answering 404 after its listener is removed", func(context.Context) (bool, error) {
		return status() == 404, nil
	})
	goneAfter := time.Since(removed)
	g.must(g.cl.Delete(ctx, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: gwA, Name: gwExtraName}}))
	if failed != 0 {
		e.t.Errorf("gateway-listener-add: %d of %d requests through the extra port failed", failed, gwProbes)
	}
	return fmt.Sprintf("extra_port_requests=%d extra_port_failed=%d served_after=%s gone_after=%s",
		gwProbes, failed, servedAfter.Round(100*time.Millisecond), goneAfter.Round(100*time.Millisecond))
}

// updateGateway applies change to the suite's Gateway, retrying on
// conflicts (the controller writes its status).
func (g *gatewaySuite) updateGateway(change func(*gatewayv1.Gateway)) {
	g.e.eventually(time.Minute, "updating the Gateway", func(ctx context.Context) (bool, error) {
		var gw gatewayv1.Gateway
		if err := g.cl.Get(ctx, client.ObjectKey{Namespace: gwA, Name: gwName}, &gw); err != nil {
			return false, err
		}
		change(&gw)
		err := g.cl.Update(ctx, &gw)
		return err == nil, ignoreConflict(err)
	})
}
