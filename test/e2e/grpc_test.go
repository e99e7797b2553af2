//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/test/grpcecho"
	"sluice.dev/sluice/test/load"
)

const (
	grpcNS   = "grpc"
	grpcApp  = "greeter"
	grpcHost = "grpc.test"
)

// TestDataPlane checks what issue 17 adds on a real cluster: a broken
// Ingress gets the expected Events from the controller, and a gRPC app
// rolled under gRPC load, through HAProxy in TCP mode in front of the
// proxies (h2c), loses no call (case grpc-roll).
func TestDataPlane(t *testing.T) {
	e := newEnv(t)
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: grpcNS}})

	cs := newCases(e)
	if cs.wants("ingress-events") {
		// A missing TLS Secret is an Event only when the controller reads
		// Secrets (off by default: least privilege; the proxies log it).
		e.stopController()
		e.ctlArgs = append(e.ctlArgs, "--read-tls-secrets")
		e.startController()
		e.brokenIngressEvents()
	}
	if cs.wants("grpc-roll") {
		e.grpcRoll()
	}
}

// brokenIngressEvents creates an Ingress with an invalid annotation, a
// missing Service, another missing Service and a missing Secret, and
// waits for one Event of each: the two ServiceNotFound are two Events (the
// events API's recorder merged them into one). Then it fixes the
// annotation and waits for its Resolved Event.
func (e *env) brokenIngressEvents() {
	e.t.Helper()
	class := "sluice"
	prefix := networkingv1.PathTypePrefix
	path := func(p, svc string) networkingv1.HTTPIngressPath {
		return networkingv1.HTTPIngressPath{Path: p, PathType: &prefix, Backend: networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}}}}
	}
	broken := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: grpcNS, Name: "broken", Annotations: map[string]string{"sluice.dev/retries": "lots"}},
		Spec: networkingv1.IngressSpec{
			IngressClassName: &class,
			TLS:              []networkingv1.IngressTLS{{Hosts: []string{"broken.test"}, SecretName: "absent"}},
			Rules: []networkingv1.IngressRule{{Host: "broken.test", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{path("/", "nowhere"), path("/other", "elsewhere")},
			}}}},
		},
	}
	e.create(broken)
	type want struct{ typ, reason, part string }
	wants := []want{
		{corev1.EventTypeWarning, "InvalidAnnotation", "sluice.dev/retries"},
		{corev1.EventTypeWarning, "ServiceNotFound", "nowhere"},
		{corev1.EventTypeWarning, "ServiceNotFound", "elsewhere"},
		{corev1.EventTypeWarning, "SecretNotFound", "absent"},
	}
	found := func(ws []want) int {
		n := 0
		e.eventually(2*time.Minute, "Events on the broken Ingress", func(ctx context.Context) (bool, error) {
			var list eventsv1.EventList
			if err := e.cl.List(ctx, &list, client.InNamespace(grpcNS)); err != nil {
				return false, err
			}
			n = 0
			for _, w := range ws {
				for _, ev := range list.Items {
					if ev.Regarding.Kind == "Ingress" && ev.Regarding.Name == "broken" && ev.Type == w.typ &&
						ev.Reason == w.reason && strings.Contains(ev.Note, w.part) {
						n++
						break
					}
				}
			}
			return n == len(ws), nil
		})
		return n
	}
	got := found(wants)
	if err := e.update(broken, func() { broken.Annotations = nil }); err != nil {
		e.t.Fatal(err)
	}
	resolved := []want{{corev1.EventTypeNormal, "Resolved", "InvalidAnnotation"}}
	got += found(resolved)
	// requests: the Events expected; failed: those missing (none, or the
	// waits above failed the test).
	n := len(wants) + len(resolved)
	e.summary(fmt.Sprintf("e2e ingress-events: requests=%d failed=%d events=%d", n, n-got, got))
}

// grpcRate is grpc-roll's fixed call rate.
const grpcRate = 300

// grpcRoll deploys the gRPC app and the proxies (with --h2c), binds the
// proxies to HAProxy's TCP-mode backend, and restarts the app under load.
func (e *env) grpcRoll() {
	e.t.Helper()
	e.create(grpcObjects()...)
	d := e.proxyDeployment()
	d.Spec.Template.Spec.Containers[0].Args = append(d.Spec.Template.Spec.Containers[0].Args, "--h2c")
	e.create(d)
	e.binding(true)
	e.grpcBinding()
	e.settled(grpcNS, grpcApp, 2*time.Minute)
	e.settled(proxyNS, proxyName, 2*time.Minute)

	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", e.grpcPort),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority(grpcHost))
	if err != nil {
		e.t.Fatal(err)
	}
	defer cc.Close()
	e.eventually(time.Minute, "a gRPC call through HAProxy and sluice", func(ctx context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		got, err := grpcecho.Unary(cctx, cc, "ping")
		return err == nil && strings.HasPrefix(got, grpcApp), nil
	})
	if err := grpcecho.Exercise(context.Background(), cc, grpcApp); err != nil {
		e.t.Fatalf("every kind of call: %v", err)
	}

	// Open-loop load with the harness's generator: one call per slot of
	// a fixed schedule, whatever earlier calls do; every tenth is a server
	// stream. gRPC calls are POSTs that grpc-go could replay on a new
	// connection when one closes before the call left the client
	// (transparent retry): the connection for the load disables retries,
	// so such a call fails and is counted instead.
	lc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", e.grpcPort),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority(grpcHost),
		grpc.WithDisableRetry())
	if err != nil {
		e.t.Fatal(err)
	}
	defer lc.Close()
	var streams atomic.Int64
	stop := make(chan struct{})
	o := load.Options{Rate: grpcRate, Stop: stop, Timeout: 20 * time.Second, MaxInFlight: 10000, SlowAfter: slowAfter,
		Call: func(ctx context.Context, i int64) error {
			var err error
			if i%10 == 0 {
				streams.Add(1)
				err = serverStream(ctx, lc, "5/20ms", 5)
			} else {
				var got string
				got, err = grpcecho.Unary(ctx, lc, "x")
				if err == nil && !strings.HasPrefix(got, grpcApp) {
					err = &load.CallError{Kind: load.KindCheck, Err: fmt.Errorf("answered by %q", got)}
				}
			}
			if s, ok := status.FromError(err); ok && err != nil && s.Code() != codes.DeadlineExceeded {
				return &load.CallError{Kind: load.KindGRPCStatus, Err: err}
			}
			return err
		}}
	done := make(chan struct{})
	var res load.Result
	var loadErr error
	go func() {
		defer close(done)
		res, loadErr = load.Run(context.Background(), o)
	}()
	time.Sleep(3 * time.Second) // load before the roll: coverage, not synchronisation
	e.restartDeployment(grpcNS, grpcApp)
	e.settled(grpcNS, grpcApp, 3*time.Minute)
	time.Sleep(loadTail) // the last old pods' exits
	close(stop)
	<-done
	if loadErr != nil {
		e.t.Errorf("grpc-roll: load: %v", loadErr)
	}
	// posts: every call is a POST that is never sent twice (retries off).
	e.summary(fmt.Sprintf("e2e grpc-roll: requests=%d failed=%d posts=%d retried=0 p99=%s max=%s slow=%d sent_ratio=%.3f streams=%d",
		res.Sent, res.Failed, res.Sent, load.RoundDur(res.Latencies.P99), load.RoundDur(res.Latencies.Max), res.Slow, res.SentRatio, streams.Load()))
	if res.Failed > 0 || res.Sent == 0 {
		e.t.Errorf("grpc-roll: %d of %d calls failed: %v; first errors: %s", res.Failed, res.Sent, res.ByKind, strings.Join(res.Errors, " | "))
	}
	if res.Slow > 0 {
		e.t.Errorf("grpc-roll: %d calls slower than %s (p99 %s, max %s)", res.Slow, slowAfter, res.Latencies.P99, res.Latencies.Max)
	}
}

// summary logs a case's summary line, prints it and appends it to
// SLUICE_E2E_SUMMARY, as the measured cases do.
func (e *env) summary(line string) {
	e.t.Log(line)
	writeSummary([]string{line})
}

// serverStream reads a server stream and checks it has n messages.
func serverStream(ctx context.Context, cc grpc.ClientConnInterface, req string, n int) error {
	st, err := grpcecho.Stream(ctx, cc, "ServerStream")
	if err != nil {
		return err
	}
	if err := grpcecho.Send(st, req); err != nil {
		return err
	}
	if err := st.CloseSend(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		if _, err := grpcecho.Recv(st); err != nil {
			if errors.Is(err, io.EOF) && i == n {
				return nil
			}
			return fmt.Errorf("stream message %d: %w", i, err)
		}
	}
}

// grpcBinding binds the proxies to HAProxy's TCP-mode backend (no
// readiness gate or drain handshake of its own: the HTTP binding has them).
func (e *env) grpcBinding() {
	e.t.Helper()
	off := false
	b := &v1alpha1.LoadBalancerBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "haproxy-grpc"},
		Spec: v1alpha1.LoadBalancerBindingSpec{
			Selector:      metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": proxyName}},
			Port:          intstr.FromString("http"),
			Provider:      v1alpha1.ProviderSpec{HAProxy: &v1alpha1.HAProxyProvider{RuntimeAPI: "unix://" + e.lbSock, Backend: grpcBackend}},
			ReadinessGate: &off,
			Drain:         v1alpha1.DrainSpec{Handshake: &off},
		},
	}
	e.create(b)
}

// grpcObjects is the gRPC app, made from the echo app's objects: three
// pods serving grpcecho (rolled one at a time), a Service whose port says
// appProtocol grpc, and an Ingress for grpcHost.
func grpcObjects() []client.Object {
	labels := map[string]string{"app.kubernetes.io/name": grpcApp} // as env.pods selects
	appProtocol := "grpc"
	var out []client.Object
	for _, o := range echoObjects() {
		switch o := o.(type) {
		case *appsv1.Deployment:
			o.Namespace, o.Name = grpcNS, grpcApp
			o.Spec.Selector.MatchLabels, o.Spec.Template.Labels = labels, labels
			grace := int64(20)
			o.Spec.Template.Spec.TerminationGracePeriodSeconds = &grace
			c := &o.Spec.Template.Spec.Containers[0]
			c.Name, c.Image = "grpc", "grpcecho"
			c.Args = []string{"--listen", "$(POD_IP):50051", "--name", "$(POD_NAME)", "--shutdown-delay", "3s"}
			c.Ports = []corev1.ContainerPort{{Name: "grpc", ContainerPort: 50051}}
			c.ReadinessProbe.ProbeHandler = corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("grpc")}}
			out = append(out, o)
		case *corev1.Service:
			o.Namespace, o.Name = grpcNS, grpcApp
			o.Spec.Selector = labels
			o.Spec.Ports = []corev1.ServicePort{{Name: "grpc", Port: 50051, TargetPort: intstr.FromString("grpc"), AppProtocol: &appProtocol}}
			out = append(out, o)
		case *networkingv1.Ingress:
			o.Namespace, o.Name = grpcNS, grpcApp
			rule := &o.Spec.Rules[0]
			rule.Host = grpcHost
			rule.HTTP.Paths[0].Backend.Service = &networkingv1.IngressServiceBackend{Name: grpcApp, Port: networkingv1.ServiceBackendPort{Name: "grpc"}}
			out = append(out, o)
		}
	}
	return out
}
