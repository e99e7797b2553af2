//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"sluice.dev/sluice/test/grpcecho"
)

const (
	grpcGWApp  = "greeter-gw"
	grpcGWHost = "grpc.gw.test"
)

// grpcRoute: case gateway-grpc. A GRPCRoute sends the Unary method of the
// echo service to a gRPC app of gw-a (its Service without appProtocol: the
// GRPCRoute makes it gRPC); calls to every proxy (h2c) are
// answered by the app, a method the route does not match is refused, and
// the route is Accepted.
func (g *gatewaySuite) grpcRoute() (int, int, string) {
	e := g.e
	ctx := context.Background()
	for _, o := range grpcObjects() {
		switch o := o.(type) {
		case *appsv1.Deployment:
			labels := map[string]string{"app.kubernetes.io/name": grpcGWApp}
			o.Namespace, o.Name = gwA, grpcGWApp
			o.Spec.Selector.MatchLabels, o.Spec.Template.Labels = labels, labels
			e.create(o)
		case *corev1.Service:
			o.Namespace, o.Name = gwA, grpcGWApp
			o.Spec.Selector = map[string]string{"app.kubernetes.io/name": grpcGWApp}
			o.Spec.Ports[0].AppProtocol = nil
			e.create(o)
		}
	}
	svc, method, port := grpcecho.ServiceName, "Unary", gatewayv1.PortNumber(50051)
	ns := gatewayv1.Namespace(gwA)
	g.must(g.cl.Create(ctx, &gatewayv1.GRPCRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: gwA, Name: "grpc"},
		Spec: gatewayv1.GRPCRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: gwName, Namespace: &ns}}},
			Hostnames:       []gatewayv1.Hostname{grpcGWHost},
			Rules: []gatewayv1.GRPCRouteRule{{
				Matches:     []gatewayv1.GRPCRouteMatch{{Method: &gatewayv1.GRPCMethodMatch{Service: &svc, Method: &method}}},
				BackendRefs: []gatewayv1.GRPCBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: grpcGWApp, Port: &port}}}},
			}},
		},
	}))
	e.settled(gwA, grpcGWApp, 3*time.Minute)
	e.eventually(gwStatusWait, "GRPCRoute gw-a/grpc Accepted", func(ctx context.Context) (bool, error) {
		var r gatewayv1.GRPCRoute
		if err := g.cl.Get(ctx, client.ObjectKey{Namespace: gwA, Name: "grpc"}, &r); err != nil {
			return false, err
		}
		for _, p := range r.Status.Parents {
			if p.ControllerName == "sluice.dev/gateway-controller" {
				return meta.IsStatusConditionTrue(p.Conditions, "Accepted"), nil
			}
		}
		return false, nil
	})
	tn := &tenancy{e: e}
	var conns []*grpc.ClientConn
	for _, ip := range tn.podIPs(proxyNS, proxyName) {
		cc, err := grpc.NewClient(net.JoinHostPort(ip, "8080"), grpc.WithAuthority(grpcGWHost),
			grpc.WithTransportCredentials(insecure.NewCredentials())) // h2c: the suite's proxies run with --h2c
		if err != nil {
			e.t.Fatal(err)
		}
		defer cc.Close()
		conns = append(conns, cc)
		var last error
		e.eventually(time.Minute, "a gRPC call through proxy "+ip, func(ctx context.Context) (bool, error) {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			got, err := grpcecho.Unary(cctx, cc, "ping")
			if err != nil && (last == nil || err.Error() != last.Error()) {
				e.t.Logf("gRPC call through proxy %s: %v", ip, err)
				last = err
			}
			return err == nil && strings.HasPrefix(got, grpcGWApp), nil
		})
	}
	n, failed := 0, 0
	for i := range gwProbes {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		got, err := grpcecho.Unary(cctx, conns[i%len(conns)], "x")
		cancel()
		n++
		if err != nil || !strings.HasPrefix(got, grpcGWApp) {
			failed++
			e.t.Logf("gRPC Unary: %q %v", got, err)
		}
	}
	// ServerStream is not matched: no route, never the app.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	refused := 0
	if st, err := grpcecho.Stream(cctx, conns[0], "ServerStream"); err == nil {
		if err := grpcecho.Send(st, "1/1ms"); err == nil {
			_ = st.CloseSend()
			if _, err := grpcecho.Recv(st); err != nil {
				refused++
			}
		}
	} else {
		refused++
	}
	n++
	if refused != 1 {
		failed++
		e.t.Errorf("a method the GRPCRoute does not match was answered")
	}
	return n, failed, fmt.Sprintf("proxies=%d unmatched_refused=%d", len(conns), refused)
}
