//go:build e2e

package e2e

import (
	"context"
	"net"
	"net/http"
	"path"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/server"
)

// attempts is how many requests (or handshakes) each tenancy case makes.
const attempts = 30

// probe is one attempt of a case: it returns the answer and whether it
// leaked and whether it was what the rule says.
type probe func() (a answer, err error, leaked, ok bool)

// attack makes the case's attempts, cycling through probes, and logs the
// first few answers that were not what the rule says.
func attack(t *testing.T, name string, probes ...probe) tally {
	t.Helper()
	var tl tally
	logged := 0
	for i := range attempts {
		a, err, leaked, ok := probes[i%len(probes)]()
		ok = ok && err == nil
		tl.count(leaked, ok)
		if (!ok || leaked) && logged < 5 {
			logged++
			t.Logf("%s: attempt %d (probe %d): %v, error %v, leaked=%v", name, i, i%len(probes), a, err, leaked)
		}
	}
	return tl
}

// B's Ingress adds Exact /login and Prefix /public/account under A's
// host: A's /public/account stays A's, /login is 404, B gets nothing.
func (tn *tenancy) pathUnderForeignHost(t *testing.T) tally {
	atk := ingress(teamB, "steal-paths", classPublic, rule(shopHost, exact("/login", echoB), prefix("/public/account", echoB)))
	tn.e.create(atk)
	canary := tn.settle(classPublic, fleetPublic, "paths")
	defer tn.remove(atk, canary)
	tn.warned(atk, "HostOwnedElsewhere")
	// Nothing of B's Ingress is served: once the controller published
	// the canary's status, B's Ingress has none.
	tn.e.eventually(time.Minute, "the canary's status", func(ctx context.Context) (bool, error) {
		return len(tn.status(ctx, canary)) > 0, nil
	})
	if lbs := tn.status(context.Background(), atk); len(lbs) > 0 {
		t.Errorf("Ingress %s/%s, nothing of which is served, has status %v", atk.Namespace, atk.Name, lbs)
	}
	want := func(host, target string, status int, app string) probe {
		return func() (answer, error, bool, bool) {
			a, err := get(tn.public(), host, target)
			return a, err, a.from(echoB), a.status == status && a.from(app)
		}
	}
	return attack(t, "paths",
		want(shopHost, "/login", 404, ""),
		want(shopHost, "/public/account", 200, echoA),
		want(shopHost, "/public/account/settings", 200, echoA),
		want("SHOP.A.Test.", "/login", 404, ""), // the same host, spelt otherwise
		want(shopHost+":80", "/public/account", 200, echoA))
}

// B's spec.defaultBackend and a rule without a host: neither becomes the
// catch-all (unknown hosts and A's unmatched paths are the proxy's 404),
// and B's default backend on an Ingress with rules applies only to B's
// own host.
func (tn *tenancy) defaultBackend(t *testing.T) tally {
	all := ingress(teamB, "catch-all", classPublic, defaultBackend(echoB))
	hostless := ingress(teamB, "hostless", classPublic, rule("", prefix("/", echoB)))
	own := ingress(teamB, "own-default", classPublic, defaultBackend(echoB), rule("own.b.test", exact("/exact", echoB)))
	tn.e.create(all, hostless, own)
	defer tn.remove(all, hostless, own, tn.settle(classPublic, fleetPublic, "default"))
	tn.warned(all, "DefaultBackendRefused")
	tn.warned(hostless, "DefaultBackendRefused")
	want := func(host, target string, status int, app string) probe {
		return func() (answer, error, bool, bool) {
			a, err := get(tn.public(), host, target)
			return a, err, a.from(echoB) && !strings.HasSuffix(host, ".b.test"), a.status == status && a.from(app)
		}
	}
	return attack(t, "default",
		want("unknown.test", "/", 404, ""),
		want(shopHost, "/unmatched", 404, ""),
		want("own.b.test", "/elsewhere", 200, echoB))
}

// A's Ingress of class internal (admin.internal.test) is served by the
// internal fleet only: through the public load balancer it is a 404.
func (tn *tenancy) classCrossing(t *testing.T) tally {
	squat := ingress(teamB, "internal-squat", classInternal, rule(shopHost, prefix("/", echoB)))
	tn.e.create(squat)
	defer tn.remove(squat, tn.settle(classPublic, fleetPublic, "class"), tn.settle(classInternal, fleetInternal, "class-internal"))
	tn.warned(squat, "HostOwnedElsewhere")
	tn.until(tn.internal(), "admin.internal.test", "/", 200, echoA)
	return attack(t, "class", func() (answer, error, bool, bool) {
		a, err := get(tn.internal(), shopHost, "/public/x")
		return a, err, a.from(echoB), a.status == 404 && a.from("")
	}, func() (answer, error, bool, bool) {
		a, err := get(tn.public(), "admin.internal.test", "/")
		return a, err, a.echo != "", a.status == 404 && a.from("")
	}, func() (answer, error, bool, bool) {
		a, err := get(tn.public(), "ADMIN.internal.test.", "/x")
		return a, err, a.echo != "", a.status == 404 && a.from("")
	})
}

// B's spec.tls names A's host (no Secret) and opts into the redirect:
// plain HTTP to A's host stays A's 200, never B's 308.
func (tn *tenancy) tlsRedirect(t *testing.T) tally {
	atk := ingress(teamB, "tls-squat", classPublic, annotated("sluice.dev/ssl-redirect", "true"), withTLS("", shopHost),
		rule("tls-squat.b.test", prefix("/", echoB)))
	tn.e.create(atk)
	defer tn.remove(atk, tn.settle(classPublic, fleetPublic, "redirect"))
	tn.warned(atk, "HostOwnedElsewhere")
	return attack(t, "redirect", func() (answer, error, bool, bool) {
		a, err := get(tn.public(), shopHost, "/public/cart")
		return a, err, a.status == http.StatusPermanentRedirect || a.from(echoB), a.status == 200 && a.from(echoA)
	})
}

// B squats *.a.test with its own certificate: B's wildcard is served for
// names B owns, never for A's hosts (A's own certificate for secure, the
// default certificate for shop, which has none), and A's host never
// falls through to B's wildcard rule.
func (tn *tenancy) wildcardCert(t *testing.T) tally {
	sec := tlsSecret(t, teamB, "b-wild", wildcardHost)
	atk := ingress(teamB, "wild", classPublic, withTLS("b-wild", wildcardHost), rule(wildcardHost, prefix("/", echoB)))
	tn.e.create(sec, atk)
	defer tn.remove(sec, atk, tn.settle(classPublic, fleetPublic, "wild"))
	for _, ip := range tn.podIPs(proxyNS, fleetPublic) {
		tn.e.eventually(tenancyTimeout, "B's wildcard certificate served for B's other.a.test by "+ip, func(context.Context) (bool, error) {
			a, err := tlsGetSNI(net.JoinHostPort(ip, itoa(publicHTTPS)), "other.a.test", "other.a.test", "/")
			return err == nil && a.cert == wildcardHost && a.from(echoB), nil
		})
	}
	want := func(sni, cert string) probe {
		return func() (answer, error, bool, bool) {
			got, err := tn.servedCert(sni)
			return answer{cert: got}, err, got == wildcardHost, got == cert
		}
	}
	// Nor do A's hosts fall through to B's wildcard rule for a path A
	// does not route.
	unmatched := func() (answer, error, bool, bool) {
		a, err := get(tn.public(), shopHost, "/login")
		return a, err, a.from(echoB), a.status == 404 && a.from("")
	}
	// B's certificate, which covers A's host, does not front it.
	fronted := func() (answer, error, bool, bool) {
		a, err := tlsGetSNI(tn.publicTLS(), "other.a.test", shopHost, "/public/x")
		return a, err, a.from(echoA), a.status == http.StatusMisdirectedRequest && a.from("")
	}
	return attack(t, "wild", want(shopHost, server.SelfSignedName), want(secureHost, secureHost), unmatched, fronted)
}

// Domain fronting: a TLS connection for one team's name carrying a
// request for the other team's host is 421 over HTTP/1.1 and HTTP/2,
// also when B's host hides in an absolute-form target or a second Host
// field (400).
func (tn *tenancy) sniHostMismatch(t *testing.T) tally {
	defer tn.remove(tn.settle(classPublic, fleetPublic, "sni"))
	misdirected := func(send func(addr, sni, host, target string) (answer, error), sni, host, victim string) probe {
		return func() (answer, error, bool, bool) {
			a, err := send(tn.publicTLS(), sni, host, "/")
			return a, err, a.from(victim), a.status == http.StatusMisdirectedRequest && a.from("")
		}
	}
	// Requests whose target or second Host names B's host on A's
	// connection: 421, or 400 for the duplicate Host.
	smuggled := func(request string) probe {
		return func() (answer, error, bool, bool) {
			a, err := tlsRaw(tn.publicTLS(), secureHost, request)
			return a, err, a.from(echoB), a.status == http.StatusMisdirectedRequest || a.status == http.StatusBadRequest && a.from("")
		}
	}
	return attack(t, "sni",
		misdirected(tlsGetSNI, secureHost, bHost, echoB),
		misdirected(h2Get, secureHost, bHost, echoB),
		misdirected(tlsGetSNI, bHost, secureHost, echoA),
		misdirected(h2Get, bHost, secureHost, echoA),
		smuggled("GET http://b.test/ HTTP/1.1\r\nHost: secure.a.test\r\nConnection: close\r\n\r\n"),
		smuggled("GET / HTTP/1.1\r\nHost: secure.a.test\r\nHost: b.test\r\nConnection: close\r\n\r\n"),
		// Not over-blocking: the SNI's own host with a port is served.
		func() (answer, error, bool, bool) {
			a, err := tlsGetSNI(tn.publicTLS(), secureHost, secureHost+":443", "/")
			return a, err, a.from(echoB), a.status == 200 && a.from(echoA)
		})
}

// Dot-segments and encoded separators never take a request out of A's
// Prefix /public: normalised first (404 for /internal, which no rule
// exposes), encoded ones refused (400), and the pod sees the normalised
// path.
func (tn *tenancy) dotSegments(t *testing.T) tally {
	want := func(target string, status int, want string) probe {
		return func() (answer, error, bool, bool) {
			a, err := get(tn.public(), shopHost, target)
			// The path the pod saw, resolved as a lenient server would
			// (a backslash is a separator to IIS and some Java servers).
			seen := path.Clean(strings.ReplaceAll(a.path, `\`, "/"))
			escaped := a.echo != "" && seen != "/public" && !strings.HasPrefix(seen, "/public/") ||
				a.status/100 == 3 && strings.Contains(a.location, "internal")
			ok := a.status == status && (want == "" && a.from("") || want != "" && a.from(echoA) && a.path == want)
			return a, err, escaped, ok
		}
	}
	return attack(t, "dots",
		want("/public/../internal", 404, ""),
		want("/public/./../internal", 404, ""),
		want("/public//..//../internal", 404, ""),
		want("/public/%2e%2e/internal", 400, ""),
		want("/public/%2E%2E%2Finternal", 400, ""),
		want("/public/..%5cinternal", 400, ""),
		want("/public/../public/x", 200, "/public/x"))
}

// B's selector-less Service with hand-written EndpointSlices pointing at
// A's pod (no targetRef; a targetRef to A's Pod): the proxies refuse both
// endpoints (sluice_endpoints_refused) and answer 503, never A's pod.
func (tn *tenancy) foreignEndpoint(t *testing.T) tally {
	e := tn.e
	live, _, err := e.pods(context.Background(), teamA, echoA)
	if err != nil || len(live) == 0 || live[0].Status.PodIP == "" {
		t.Fatalf("A's pod: %v %v", live, err)
	}
	victim := live[0]
	port := int32(8080)
	portName := "http"
	// One slice, so that the proxies judge both endpoints in one
	// table: one without a targetRef, one naming A's Pod.
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: teamB, Name: "steal", Labels: map[string]string{discoveryv1.LabelServiceName: "steal"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{victim.Status.PodIP}},
			{Addresses: []string{victim.Status.PodIP}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: teamA, Name: victim.Name}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
	}
	objs := []client.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "steal"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(port)}}}},
		slice,
		ingress(teamB, "steal", classPublic, rule("steal.b.test", prefix("/", "steal"))),
	}
	e.create(objs...)
	defer tn.remove(append(objs, tn.settle(classPublic, fleetPublic, "endpoints"))...)
	tn.warned(objs[2], "EndpointsRefused")
	for _, ip := range tn.podIPs(proxyNS, fleetPublic) {
		e.eventually(tenancyTimeout, "the forged slice judged by "+ip, func(context.Context) (bool, error) {
			n, err := scrapeLabelled(net.JoinHostPort(ip, "9090"), "sluice_endpoints_refused", "")
			return err == nil && n >= 1, nil
		})
	}
	return attack(t, "endpoints", func() (answer, error, bool, bool) {
		a, err := get(tn.public(), "steal.b.test", "/")
		return a, err, a.echo != "", a.status == http.StatusServiceUnavailable && a.from("")
	})
}

// A shares its host with B (sluice.dev/share-host-with): B's path under
// it is served, and so is A's; B's certificate for the shared host is
// not (only the owner's TLS entries count).
func (tn *tenancy) shareHost(t *testing.T) tally {
	const shared, own = "shared.a.test", "share.b.test"
	owner := ingress(teamA, "shared", classPublic, annotated("sluice.dev/share-host-with", teamB), rule(shared, prefix("/a", echoA)))
	sec := tlsSecret(t, teamB, "b-share", own, shared)
	guest := ingress(teamB, "shared", classPublic, withTLS("b-share", shared, own), rule(shared, prefix("/b", echoB)), rule(own, prefix("/", echoB)))
	tn.e.create(owner, sec, guest)
	defer tn.remove(owner, sec, guest, tn.settle(classPublic, fleetPublic, "share"))
	tn.warned(guest, "HostOwnedElsewhere") // its TLS entry for the shared host
	for _, ip := range tn.podIPs(proxyNS, fleetPublic) {
		tn.e.eventually(tenancyTimeout, "B's certificate served for B's "+own+" by "+ip, func(context.Context) (bool, error) {
			a, err := tlsGetSNI(net.JoinHostPort(ip, itoa(publicHTTPS)), own, own, "/")
			return err == nil && a.cert == own && a.from(echoB), nil
		})
	}
	want := func(target, app, other string) probe {
		return func() (answer, error, bool, bool) {
			a, err := get(tn.public(), shared, target)
			return a, err, a.from(other), a.status == 200 && a.from(app)
		}
	}
	// Sharing hands over paths, not the certificate (nor the redirect:
	// B's TLS entry would turn it on for the shared host).
	cert := func() (answer, error, bool, bool) {
		got, err := tn.servedCert(shared)
		return answer{cert: got}, err, got == own, got == server.SelfSignedName
	}
	return attack(t, "share", want("/b/page", echoB, echoA), want("/a/page", echoA, echoB), cert)
}

// cert-manager's first issuance for A's TLS host (Secret not there yet,
// redirect on): the HTTP-01 challenge is answered over plain HTTP by the
// solver's route, not redirected, and B's squatting solver for A's host
// gets nothing. The rest of the host is redirected, and a TLS handshake
// completes with the default certificate.
func (tn *tenancy) acmeHTTP01(t *testing.T) tally {
	const host, token = "acme.a.test", "/.well-known/acme-challenge/t0ken"
	app := ingress(teamA, "acme", classPublic, annotated("sluice.dev/ssl-redirect", "true"), withTLS("acme-tls", host), rule(host, prefix("/", echoA)))
	solver := ingress(teamA, "cm-acme-http-solver-x7k2p", classPublic,
		rule(host, ingressPath(token, networkingv1.PathTypeImplementationSpecific, echoA)))
	squat := ingress(teamB, "acme-squat", classPublic, rule(host, prefix("/.well-known/acme-challenge", echoB)))
	tn.e.create(app, solver, squat)
	defer tn.remove(app, solver, squat, tn.settle(classPublic, fleetPublic, "acme"))
	tn.warned(squat, "HostOwnedElsewhere")
	if a, err := get(tn.public(), host, "/shop"); err != nil || a.status != http.StatusPermanentRedirect {
		t.Errorf("plain HTTP to %s/shop: %v %v, want 308 (the redirect is on for the host)", host, a, err)
	}
	if cn, err := tn.servedCert(host); err != nil || cn != server.SelfSignedName {
		t.Errorf("TLS for %s (Secret missing): certificate %q, %v; want the default certificate", host, cn, err)
	}
	return attack(t, "acme", func() (answer, error, bool, bool) {
		a, err := get(tn.public(), host, token)
		return a, err, a.from(echoB), a.status == 200 && a.from(echoA) && a.path == token
	})
}

// status is an Ingress's status.loadBalancer.ingress (nil if it cannot
// be read).
func (tn *tenancy) status(ctx context.Context, ing client.Object) []networkingv1.IngressLoadBalancerIngress {
	var got networkingv1.Ingress
	if err := tn.e.cl.Get(ctx, client.ObjectKeyFromObject(ing), &got); err != nil {
		return nil
	}
	return got.Status.LoadBalancer.Ingress
}
