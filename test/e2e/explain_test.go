//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/api/v1alpha1"
)

// explain runs `sluice explain` with the cluster's admin kubeconfig and
// returns its output and exit status (0: no cause, 1: a cause found).
func (e *env) explain(args ...string) (string, int) {
	e.t.Helper()
	return e.cli(append(append([]string{"explain"}, args...), "--kubeconfig", e.c.Kubeconfig(), "--controller-namespace", proxyNS)...)
}

// cli runs the sluice binary with args and returns its output (stdout and
// stderr) and exit status; it fails the test if the binary cannot run.
func (e *env) cli(args ...string) (string, int) {
	e.t.Helper()
	cmd := exec.Command(e.sluice, args...)
	// The run's own SLUICE_ variables (SLUICE_KUBECONFIG, ...) would set
	// the command's flags.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	default:
		e.t.Fatalf("sluice %s: %v", args[0], err)
		return "", -1
	}
}

// explainCase waits until `sluice explain` on the object names the
// expected cause (want "": a healthy chain, exit 0), and prints
// `e2e explain-<name>: requests=1 failed=F cause_found=B`: failed is 1
// when the verdict never came.
func (e *env) explainCase(name string, args []string, want string) {
	e.t.Helper()
	var out string
	var code int
	ok := false
	deadline := time.Now().Add(90 * time.Second)
	for !ok && time.Now().Before(deadline) {
		out, code = e.explain(args...)
		if want == "" {
			ok = code == 0 && strings.Contains(out, "no problem found")
		} else {
			_, causes, found := strings.Cut(out, "\ncauses:")
			ok = code == 1 && found && strings.Contains(causes, want)
		}
		if !ok {
			time.Sleep(time.Second)
		}
	}
	failed := 0
	if !ok {
		failed = 1
		e.t.Errorf("explain-%s: `sluice explain %s` (exit %d) never named %q:\n%s", name, strings.Join(args, " "), code, want, out)
	}
	e.t.Logf("explain-%s output:\n%s", name, out)
	e.summary(fmt.Sprintf("e2e explain-%s: requests=1 failed=%d cause_found=%t", name, failed, want != "" && ok))
}

// explainCases (TestHelm) explains a healthy Ingress, an Ingress whose
// Service is missing, one whose TLS Secret is missing, and one whose
// class's binding names a load balancer the controller cannot reach; then
// removes what they made.
func (e *env) explainCases(cs *cases) {
	e.t.Helper()
	if cs.wants("explain-healthy") {
		e.explainCase("healthy", []string{"ingress", appNS + "/" + appName}, "")
	}
	class := "sluice"
	prefix := networkingv1.PathTypePrefix
	ingress := func(name, className, svc, secret string) *networkingv1.Ingress {
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: appNS, Name: name},
			Spec: networkingv1.IngressSpec{IngressClassName: &className,
				Rules: []networkingv1.IngressRule{{Host: name + ".test", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{
						Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
				}}}}}}
		if secret != "" {
			ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{name + ".test"}, SecretName: secret}}
		}
		return ing
	}
	var made []client.Object
	defer func() {
		for _, o := range made {
			if err := e.cl.Delete(context.Background(), o); err != nil && !apierrors.IsNotFound(err) {
				e.t.Errorf("removing %s: %v", o.GetName(), err)
			}
		}
	}()
	if cs.wants("explain-missing-service") {
		ing := ingress("explain-nosvc", class, "absent-svc", "")
		e.create(ing)
		made = append(made, ing)
		e.explainCase("missing-service", []string{"ingress", appNS + "/explain-nosvc"}, "ServiceNotFound: service app/absent-svc not found")
	}
	if cs.wants("explain-missing-secret") {
		ing := ingress("explain-nosecret", class, appName, "absent-tls")
		e.create(ing)
		made = append(made, ing)
		e.explainCase("missing-secret", []string{"ingress", appNS + "/explain-nosecret"}, "SecretNotFound: spec.tls[0]: secret app/absent-tls not found")
	}
	if cs.wants("explain-unreachable-provider") {
		// A class whose binding names a runtime API nothing listens on
		// (in the controller pod's own network namespace), for pods that
		// do not exist: it gates and registers nothing.
		off := false
		dead := &v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "explain-dead"},
			Spec: v1alpha1.LoadBalancerBindingSpec{
				Selector:      metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "nothing"}},
				Port:          intstr.FromInt32(8080),
				ReadinessGate: &off,
				Provider:      v1alpha1.ProviderSpec{HAProxy: &v1alpha1.HAProxyProvider{RuntimeAPI: "tcp://127.0.0.1:1", Backend: "dead"}},
			}}
		group, scope, ns := "sluice.dev", networkingv1.IngressClassParametersReferenceScopeNamespace, proxyNS
		ic := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "explain-dead"},
			Spec: networkingv1.IngressClassSpec{Controller: "sluice.dev/ingress-controller",
				Parameters: &networkingv1.IngressClassParametersReference{APIGroup: &group, Kind: "LoadBalancerBinding", Name: dead.Name, Scope: &scope, Namespace: &ns}}}
		ing := ingress("explain-dead", ic.Name, appName, "")
		e.create(dead, ic, ing)
		made = append(made, ing, ic)
		e.explainCase("unreachable-provider", []string{"ingress", appNS + "/explain-dead"}, "the controller cannot reach the load balancer of binding sluice-system/explain-dead")
		e.abandon(dead)
	}
}

// abandon deletes binding b, whose load balancer is unreachable, and lets
// it go without deregistering its targets: sluice.dev/abandon-targets set
// to the generation the deletion raised it to. It waits until b is gone.
func (e *env) abandon(b *v1alpha1.LoadBalancerBinding) {
	e.t.Helper()
	if err := e.cl.Delete(context.Background(), b); err != nil && !apierrors.IsNotFound(err) {
		e.t.Fatal(err)
	}
	e.eventually(2*time.Minute, "the abandoned binding gone", func(ctx context.Context) (bool, error) {
		var cur v1alpha1.LoadBalancerBinding
		switch err := e.cl.Get(ctx, client.ObjectKeyFromObject(b), &cur); {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			return false, err
		}
		gen := strconv.FormatInt(cur.Generation, 10)
		if cur.Annotations[v1alpha1.AnnotationAbandonTargets] != gen {
			if cur.Annotations == nil {
				cur.Annotations = map[string]string{}
			}
			cur.Annotations[v1alpha1.AnnotationAbandonTargets] = gen
			if err := e.cl.Update(ctx, &cur); err != nil && !apierrors.IsConflict(err) {
				return false, err
			}
		}
		return false, nil
	})
}

// explainGatewayCases (TestGateway) explains a second, healthy Gateway of
// gw-a with its one route (explain-gateway-healthy), and the suite's
// Gateway, to which gw-b's route is not allowed to attach
// (explain-gateway-route-refused: the cause names NotAllowedByListeners).
func (g *gatewaySuite) explainCases(cs *cases) {
	e := g.e
	if cs.wants("explain-gateway-healthy") {
		ctx := context.Background()
		const name, host = "explained", "explain.gw.test"
		hostname := gatewayv1.Hostname(host)
		g.must(g.cl.Create(ctx, &gatewayv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Namespace: gwA, Name: name},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "sluice", Listeners: []gatewayv1.Listener{{
				Name: "http", Protocol: gatewayv1.HTTPProtocolType, Port: 80, Hostname: &hostname,
			}}},
		}))
		route := httpRoute(gwA, name, host, "", echoGWA)
		route.Spec.ParentRefs[0].Name = name
		g.must(g.cl.Create(ctx, route))
		e.explainCase("gateway-healthy", []string{"gateway", gwA + "/" + name}, "")
	}
	if cs.wants("explain-gateway-route-refused") {
		e.explainCase("gateway-route-refused", []string{"gateway", gwA + "/" + gwName}, "NotAllowedByListeners")
	}
}
