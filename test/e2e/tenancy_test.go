//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The tenancy suite's layout: two IngressClasses, each with a proxy fleet
// of its own (bindings[].proxy) behind its own HAProxy frontend, and two
// tenant namespaces with an echo app each. Each class's binding has the
// class's name, so its fleet is RELEASE-proxy-CLASS. Team A's Ingresses
// are created first, so A owns its hosts; team B is the attacker.
const (
	teamA, teamB   = "team-a", "team-b"
	echoA, echoB   = "echo-a", "echo-b"
	classPublic    = "public"
	classInternal  = "internal"
	fleetPublic    = proxyName + "-" + classPublic
	fleetInternal  = proxyName + "-" + classInternal
	feInternal     = "internal"   // HAProxy HTTP frontend of the internal fleet
	fePublicTLS    = "public-tls" // HAProxy TCP frontend: TLS through to the public fleet
	shopHost       = "shop.a.test"
	secureHost     = "secure.a.test" // A's host with A's certificate
	limitsHost     = "limits.a.test"
	bHost          = "b.test"
	wildcardHost   = "*.a.test"
	publicHTTPS    = 8443
	tenancyTimeout = 2 * time.Minute
)

// TestTenancy installs sluice with `helm install` of deploy/helm/sluice
// for a cluster shared by two teams, and has team B (rights in its own
// namespace only) try each attack of issue 23 against the real proxies,
// counting what got through:
//
//	e2e tenancy-<case>: requests=N failed=F leaked=L served_ok=S
//
// requests counts the attempts, failed those not answered exactly as the
// rule says (N - S); leaked counts answers that came from a Service the attacker must not
// reach (or a certificate or redirect team B chose for team A's host);
// served_ok counts answers that were exactly what the rule says (the
// owner's Service, 404, 421, the default certificate ...). Every case
// must show failed=0, leaked=0 and served_ok=requests. Before it attacks, a case
// waits until every proxy of the fleet has seen B's objects (B's canary
// Ingress, created after them, is served), so a refusal is never just a
// proxy that has not caught up.
//
// The limits-* cases set slow and hostile clients on one proxy of the
// public fleet (small limits from the chart's proxy.limits) while a
// legitimate client sends 50 requests a second to it:
//
//	e2e limits-<case>: requests=N failed=F attackers_closed=C
//
// failed must be 0 and every attacker closed by the proxy.
func TestTenancy(t *testing.T) {
	h := installChart(t, "slt", chartOptions{
		haproxy: func(e *env) {
			e.frontends = []frontend{{name: feInternal}, {name: fePublicTLS, tcp: true}}
		},
		base: tenancyValues,
	})
	e := h.env
	a := tenantObjects(t, teamA, echoA)
	b := tenantObjects(t, teamB, echoB)
	e.create(a...)
	e.create(b...)
	tn := &tenancy{e: e, cs: newCases(e)}
	tn.ready()

	tn.run("tenancy-path-under-foreign-host", tn.pathUnderForeignHost)
	tn.run("tenancy-default-backend", tn.defaultBackend)
	tn.run("tenancy-class-crossing", tn.classCrossing)
	tn.run("tenancy-tls-redirect", tn.tlsRedirect)
	tn.run("tenancy-wildcard-cert", tn.wildcardCert)
	tn.run("tenancy-sni-host-mismatch", tn.sniHostMismatch)
	tn.run("tenancy-dot-segments", tn.dotSegments)
	tn.run("tenancy-foreign-endpoint", tn.foreignEndpoint)
	tn.forgedEndpointIP()
	tn.run("tenancy-share-host", tn.shareHost)
	tn.run("tenancy-acme-http01", tn.acmeHTTP01)
	tn.limits()
}

// tenancyValues are the chart values of TestTenancy: two classes, each
// with its binding and fleet, one controller. The public fleet redirects
// TLS hosts to HTTPS by default (--ssl-redirect, so that a TLS entry
// turns the redirect on) and has small client limits for the limits-*
// cases.
func tenancyValues(runtimeAPI string) string {
	return fmt.Sprintf(`image: {repository: ghcr.io/sluice-dev/sluice, tag: e2e}
listenOnPodIP: true
controller:
  replicas: 1
  logFormat: text
  logLevel: debug
proxy:
  replicas: 1
  httpsPort: %d
  drainMaxWaitSeconds: 10
  shutdownTimeoutSeconds: 5
  terminationMarginSeconds: 5
  logFormat: text
  podDisruptionBudget: {enabled: false}
ingressClasses:
  - {name: %s, binding: %[2]s}
  - {name: %s, binding: %[3]s}
bindings:
  - name: %[2]s
    provider:
      haproxy: {runtimeAPI: %[4]q, backend: %[5]s}
    publish: [{ip: 127.0.0.1}]
    proxy:
      replicas: 2
      sslRedirect: true
      limits: {readHeaderTimeout: 1s, bodyIdleTimeout: 1s, writeIdleTimeout: 1s, maxConnections: %[6]d}
  - name: %[3]s
    provider:
      haproxy: {runtimeAPI: %[4]q, backend: %[7]s}
    publish: [{ip: 127.0.0.2}]
    proxy: {}
`, publicHTTPS, classPublic, classInternal, runtimeAPI, backend, connCap, feInternal)
}

// tenancy runs the suite's cases on one env.
type tenancy struct {
	e  *env
	cs *cases
}

// tally is what one case counted.
type tally struct{ attempts, leaked, ok int }

// count adds one attempt: leaked if it reached what the attacker must not
// reach, ok if it was answered as the rule says.
func (tl *tally) count(leaked, ok bool) {
	tl.attempts++
	if leaked {
		tl.leaked++
	}
	if ok {
		tl.ok++
	}
}

// run runs one tenancy case (if SLUICE_E2E_CASES selects it), prints its
// summary line and checks it. A case also waits for the Warning Event on
// each refused Ingress (tenancy.warned): what the tenant is told.
func (tn *tenancy) run(name string, c func(t *testing.T) tally) {
	if !tn.cs.wants(name) {
		return
	}
	t := tn.e.t
	tl := c(t)
	line := fmt.Sprintf("e2e %s: requests=%d failed=%d leaked=%d served_ok=%d", name, tl.attempts, tl.attempts-tl.ok, tl.leaked, tl.ok)
	t.Log(line)
	writeSummary([]string{line})
	if tl.attempts == 0 || tl.leaked != 0 || tl.ok != tl.attempts {
		t.Errorf("%s: %d of %d attempts leaked, %d answered as the rule says", name, tl.leaked, tl.attempts, tl.ok)
	}
}

// ready waits for both fleets, the controller and both teams' apps, puts
// the public fleet's TLS port behind the TCP frontend, and waits until
// A's hosts are served through both load balancers.
func (tn *tenancy) ready() {
	e := tn.e
	e.settled(proxyNS, controllerName, 3*time.Minute)
	e.settled(teamA, echoA, 3*time.Minute)
	e.settled(teamB, echoB, 3*time.Minute)
	e.settled(proxyNS, fleetPublic, 4*time.Minute)
	e.settled(proxyNS, fleetInternal, 4*time.Minute)
	for i, ip := range tn.podIPs(proxyNS, fleetPublic) {
		srv := fmt.Sprintf("%s/p%d", fePublicTLS, i)
		if out := e.lbCommand(fmt.Sprintf("add server %s %s", srv, net.JoinHostPort(ip, itoa(publicHTTPS)))); !strings.Contains(out, "New server registered") {
			e.t.Fatalf("adding %s to HAProxy: %s", srv, out)
		}
		e.lbCommand("enable server " + srv)
	}
	tn.until(tn.public(), shopHost, "/public/ready", 200, echoA)
	tn.until(tn.internal(), "admin.internal.test", "/", 200, echoA)
	for _, ip := range tn.podIPs(proxyNS, fleetPublic) {
		e.eventually(tenancyTimeout, "A's certificate served for "+secureHost+" by "+ip, func(context.Context) (bool, error) {
			a, err := tlsGetSNI(net.JoinHostPort(ip, itoa(publicHTTPS)), secureHost, secureHost, "/")
			return err == nil && a.cert == secureHost && a.from(echoA), nil
		})
	}
}

func (tn *tenancy) public() string   { return fmt.Sprintf("127.0.0.1:%d", tn.e.lbPort) }
func (tn *tenancy) internal() string { return fmt.Sprintf("127.0.0.1:%d", tn.e.frontPorts[feInternal]) }
func (tn *tenancy) publicTLS() string {
	return fmt.Sprintf("127.0.0.1:%d", tn.e.frontPorts[fePublicTLS])
}

// podIPs lists the IPs of the live pods labelled app.kubernetes.io/name=name.
func (tn *tenancy) podIPs(ns, name string) []string {
	e := tn.e
	var ips []string
	e.eventually(time.Minute, "pod IPs of "+name, func(ctx context.Context) (bool, error) {
		live, _, err := e.pods(ctx, ns, name)
		ips = ips[:0]
		for _, p := range live {
			if p.Status.PodIP != "" {
				ips = append(ips, p.Status.PodIP)
			}
		}
		return err == nil && len(live) > 0 && len(ips) == len(live), err
	})
	return ips
}

// until waits until addr answers GET host path with status from an echo
// pod of app (app "": from the proxy itself).
func (tn *tenancy) until(addr, host, path string, status int, app string) {
	tn.e.t.Helper()
	tn.e.eventually(tenancyTimeout, fmt.Sprintf("%s%s answering %d from %q through %s", host, path, status, app, addr), func(context.Context) (bool, error) {
		a, err := get(addr, host, path)
		return err == nil && a.status == status && a.from(app), nil
	})
}

// settle creates B's canary Ingress (class class, host
// canary-NAME.b.test) after the objects a case made, waits until every
// proxy of fleet serves it, and returns it: the proxies read Ingresses in
// order, so they have seen the case's Ingresses too.
func (tn *tenancy) settle(class, fleet, name string) client.Object {
	e := tn.e
	e.t.Helper()
	host := "canary-" + name + ".b.test"
	canary := ingress(teamB, "canary-"+name, class, rule(host, prefix("/", echoB)))
	e.create(canary)
	for _, ip := range tn.podIPs(proxyNS, fleet) {
		tn.until(net.JoinHostPort(ip, "8080"), host, "/", 200, echoB)
	}
	return canary
}

// warned waits until the controller's Warning Event reason is on ing
// (the problems reconciler runs the proxies' translation), and checks that
// an ownership Event does not name the other team's namespace (it would
// tell who owns a host). EndpointsRefused quotes the refused targetRef,
// which the Ingress's own namespace wrote. It returns the Event's message.
func (tn *tenancy) warned(ing client.Object, reason string) string {
	e := tn.e
	e.t.Helper()
	var note string
	e.eventually(time.Minute, fmt.Sprintf("Event %s on Ingress %s/%s", reason, ing.GetNamespace(), ing.GetName()), func(ctx context.Context) (bool, error) {
		var evs corev1.EventList
		if err := e.cl.List(ctx, &evs, client.InNamespace(ing.GetNamespace())); err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			o := ev.InvolvedObject
			if o.Kind == "Ingress" && o.Name == ing.GetName() && ev.Reason == reason && ev.Type == corev1.EventTypeWarning {
				note = ev.Message
				return true, nil
			}
		}
		return false, nil
	})
	for _, ns := range []string{teamA, teamB} {
		if reason != "EndpointsRefused" && ns != ing.GetNamespace() && strings.Contains(note, ns) {
			e.t.Errorf("Event %s on %s/%s names namespace %s: %q", reason, ing.GetNamespace(), ing.GetName(), ns, note)
		}
	}
	return note
}

// remove deletes a case's objects.
func (tn *tenancy) remove(objs ...client.Object) {
	for _, o := range objs {
		if err := tn.e.cl.Delete(context.Background(), o); err != nil {
			tn.e.t.Errorf("deleting %T %s/%s: %v", o, o.GetNamespace(), o.GetName(), err)
		}
	}
}

// tenantObjects are a team's namespace and echo app, and its first
// Ingresses: team A's hosts (shop with /public only, secure with A's
// certificate, limits for the limits-* cases, an internal admin host),
// team B's own host.
func tenantObjects(t *testing.T, ns, app string) []client.Object {
	objs := echoApp(ns, app, 1, map[string]string{"app": app, "app.kubernetes.io/name": app})
	if ns == teamB {
		return append(objs, ingress(ns, "b", classPublic, rule(bHost, prefix("/", app))))
	}
	return append(objs,
		tlsSecret(t, ns, "a-tls", secureHost),
		ingress(ns, "shop", classPublic, rule(shopHost, prefix("/public", app))),
		ingress(ns, "secure", classPublic, withTLS("a-tls", secureHost), rule(secureHost, prefix("/", app))),
		ingress(ns, "limits", classPublic, rule(limitsHost, prefix("/", app))),
		ingress(ns, "admin", classInternal, rule("admin.internal.test", prefix("/", app))),
	)
}

// ingress builds an Ingress of class with rules, changed by the
// functions among opts.
func ingress(ns, name, class string, parts ...any) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       networkingv1.IngressSpec{IngressClassName: &class},
	}
	for _, p := range parts {
		switch p := p.(type) {
		case networkingv1.IngressRule:
			ing.Spec.Rules = append(ing.Spec.Rules, p)
		case func(*networkingv1.Ingress):
			p(ing)
		default:
			panic(fmt.Sprintf("ingress: %T", p))
		}
	}
	return ing
}

func rule(host string, paths ...networkingv1.HTTPIngressPath) networkingv1.IngressRule {
	return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}
}

func ingressPath(p string, typ networkingv1.PathType, svc string) networkingv1.HTTPIngressPath {
	return networkingv1.HTTPIngressPath{Path: p, PathType: &typ, Backend: serviceBackend(svc)}
}

func prefix(p, svc string) networkingv1.HTTPIngressPath {
	return ingressPath(p, networkingv1.PathTypePrefix, svc)
}

func exact(p, svc string) networkingv1.HTTPIngressPath {
	return ingressPath(p, networkingv1.PathTypeExact, svc)
}

func serviceBackend(svc string) networkingv1.IngressBackend {
	return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Name: "http"}}}
}

func withTLS(secret string, hosts ...string) func(*networkingv1.Ingress) {
	return func(ing *networkingv1.Ingress) {
		ing.Spec.TLS = append(ing.Spec.TLS, networkingv1.IngressTLS{Hosts: hosts, SecretName: secret})
	}
}

func annotated(kv ...string) func(*networkingv1.Ingress) {
	return func(ing *networkingv1.Ingress) {
		if ing.Annotations == nil {
			ing.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			ing.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func defaultBackend(svc string) func(*networkingv1.Ingress) {
	return func(ing *networkingv1.Ingress) {
		b := serviceBackend(svc)
		ing.Spec.DefaultBackend = &b
	}
}

// tlsSecret is a kubernetes.io/tls Secret with a self-signed certificate
// for hosts, whose common name is the first.
func tlsSecret(t *testing.T, ns, name string, hosts ...string) *corev1.Secret {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: hosts[0]},
		DNSNames:     hosts,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		},
	}
}
