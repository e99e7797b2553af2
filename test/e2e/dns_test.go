//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller/ingressstatus"
	"sluice.dev/sluice/internal/dns"
	"sluice.dev/sluice/internal/dns/rfc2136"
	"sluice.dev/sluice/internal/dns/rfc2136/bindtest"
	"sluice.dev/sluice/internal/lb/aws"
	"sluice.dev/sluice/internal/lb/aws/awsfake"
)

// DNS test zones and the load balancer addresses of the two classes. The
// addresses are only data in DNS answers: no traffic goes to them.
const (
	corpZone     = "corp.test"
	publicZone   = "public.test"
	internalIP   = "192.0.2.10"
	internetName = "lb-internet.example.net"
	dnsDelay     = 5 * time.Second // --dns-delete-delay
	// dnsInterval is --dns-interval: every "nothing changes" window below
	// (2–3 × dnsDelay) spans at least five periodic passes, not only the
	// passes that a change starts.
	dnsInterval = 2 * time.Second
)

// foreignRRs are planted in corp.test before the controller starts, by
// the zone's admin: names sluice must never write over, update or delete,
// of every type an admin puts beside sluice's records. dns-foreign has an
// Ingress ask for all of them; foreign_touched counts samples (every
// 100 ms, all cases) whose record sets of these names, read whole by zone
// transfer, differ from what was planted.
var foreignRRs = []string{
	"planted.corp.test. 300 IN A 203.0.113.5",
	"foreign-aaaa.corp.test. 300 IN AAAA 2001:db8::5",
	"foreign-cname.corp.test. 300 IN CNAME elsewhere.example.net.",
	"foreign-txt.corp.test. 300 IN TXT \"v=spf1 -all\"",
	"foreign-mx.corp.test. 300 IN MX 10 mail.example.net.",
}

// foreignNames are the owner names of foreignRRs.
func foreignNames(rrs []string) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, strings.TrimSuffix(strings.Fields(rr)[0], "."))
	}
	return out
}

// TestDNS runs the DNS cases on one cluster, against a real BIND serving
// two zones, with the controller on the host (--dns-provider rfc2136):
//
//	Ingress (class internal | internet) ─► IngressClass parameters ─► binding ─► status.addresses
//	sluice controller ── signed AXFR / UPDATE ──► named 127.0.0.1 (corp.test, public.test)
//
// A sampler queries every wanted name every 100 ms during every case;
// wrongly_deleted counts names that stopped resolving while wanted, and
// foreign_touched samples where the planted foreign record sets (see
// foreignRRs) were not as planted. --dns-interval is 2 s, so every window
// covers several periodic passes. The
// cases build on each other (dns-publish creates the Ingresses the next
// ones change): with SLUICE_E2E_CASES, include dns-publish. dns-route53
// comes last: it restarts the controller with --dns-provider route53.
func TestDNS(t *testing.T) {
	// Its cases mostly wait (record TTLs, delete delays), with no load, so it
	// runs beside TestZeroDowntime, on its own cluster, to shorten make test.
	t.Parallel()
	if _, err := os.Stat("/usr/sbin/named"); err != nil {
		t.Skip("named (bind9) not installed")
	}
	// sluice from its chart, DNS through controller.dns.* alone (no
	// extraArgs) with the TSIG key and the ownership key from Secrets; BIND on the cluster bridge,
	// where the controller pods reach it. No proxies: the bindings only
	// give their classes an address.
	var bind *bindtest.Server
	h := installChart(t, "sld", chartOptions{
		haproxy: func(e *env) { e.backends = []string{"internal", "internet"} },
		setup: func(e *env) string {
			bind = bindtest.StartOn(t, e.c.BridgeIP().String(), corpZone, publicZone)
			for _, rr := range foreignRRs {
				if err := bind.Update(corpZone, rr); err != nil {
					t.Fatalf("planting a foreign record: %v", err)
				}
			}
			e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: proxyNS}},
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "sluice-dns-ownership"},
					Data: map[string][]byte{"keys": []byte(randomKey(t) + "\n")}},
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "sluice-tsig"},
					Data: map[string][]byte{"secret": []byte(bind.Secret + "\n")}})
			return fmt.Sprintf(`proxy: {replicas: 0}
bindings: []
ingressClasses: [{name: internal, binding: internal}, {name: internet, binding: internet}]
controller:
  dns:
    provider: rfc2136
    zones: [%s, %s]
    ownerID: e2e
    ttl: 5s
    interval: %s
    deleteDelay: %s
    ownershipKeySecret: {name: sluice-dns-ownership, key: keys}
    rfc2136:
      server: %q
      tsigKeyName: %s
      tsigSecret: {name: sluice-tsig, key: secret}
`, corpZone, publicZone, dnsInterval, dnsDelay, bind.Addr, bindtest.KeyName)
		},
	})
	e := h.env

	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}})
	e.dnsBinding("internal", v1alpha1.PublishAddress{IP: internalIP})
	e.dnsBinding("internet", v1alpha1.PublishAddress{Hostname: internetName})

	s := newSampler(bind)
	defer s.stop()
	s.watchForeign(func() ([]string, error) { return bindRecords(bind, foreignNames(foreignRRs)) })
	if n := s.baselineSize(); n != len(foreignRRs) {
		t.Fatalf("the zone transfer shows %d of the %d planted foreign records: foreign_touched could not fail", n, len(foreignRRs))
	}
	only := newCases(e)
	var lines []string
	run := func(name string, body func(r *dnsCase)) {
		if !only.wants(name) {
			return
		}
		r := &dnsCase{name: name, pass: true, t: t}
		s.reset()
		body(r)
		r.wronglyDeleted, r.foreignTouched = s.counts()
		if r.wronglyDeleted > 0 || r.foreignTouched > 0 {
			r.fail("%d names vanished while wanted (%v), %d samples found the foreign records touched (last: %v)", r.wronglyDeleted, s.vanishedNames(), r.foreignTouched, s.lastChanged())
		}
		lines = append(lines, r.String())
		t.Log(r.String())
	}
	defer func() { writeSummary(lines) }()

	run("dns-publish", func(r *dnsCase) {
		start := time.Now()
		e.create(dnsIngress("web", "internal", "www."+corpZone), dnsIngress("shop", "internet", "shop."+publicZone))
		r.publish = append(r.publish, s.resolves(e, "www."+corpZone, internalIP, start))
		r.publish = append(r.publish, s.resolves(e, "shop."+publicZone, internetName, start))
		s.want("www."+corpZone, "shop."+publicZone)
	})
	run("dns-change-host", func(r *dnsCase) {
		start := time.Now()
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: appNS, Name: "shop"}}
		if err := e.update(ing, func() { ing.Spec.Rules[0].Host = "store." + publicZone }); err != nil {
			t.Fatal(err)
		}
		s.unwant("shop." + publicZone)
		r.publish = append(r.publish, s.resolves(e, "store."+publicZone, internetName, start))
		s.want("store." + publicZone)
		s.gone(e, r, "shop."+publicZone, start)
	})
	run("dns-binding-deleted", func(r *dnsCase) {
		before := s.zone(t)
		b := &v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "internal"}}
		if err := e.cl.Delete(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		e.eventually(60*time.Second, "the binding gone", func(ctx context.Context) (bool, error) {
			err := e.cl.Get(ctx, client.ObjectKeyFromObject(b), b)
			return client.IgnoreNotFound(err) == nil && err != nil, nil
		})
		e.eventually(60*time.Second, "an Event saying why nothing is deleted", func(ctx context.Context) (bool, error) {
			return e.hasEvent(ctx, "web", dns.ProblemUnknownAddress), nil
		})
		time.Sleep(3 * dnsDelay) // well past the delete delay
		if after := s.zone(t); !slices.Equal(before, after) {
			r.fail("the zones changed after the binding was deleted:\nbefore %v\nafter  %v", before, after)
		}
		e.dnsBinding("internal", v1alpha1.PublishAddress{IP: internalIP})
	})
	run("dns-controller-restart", func(r *dnsCase) {
		before := s.zone(t)
		h.killControllers()
		h.leader()
		// The new process waits out the killed one's lease, then reconciles.
		e.eventually(90*time.Second, "the restarted controller reconciling DNS", e.dnsReconciled)
		time.Sleep(3 * dnsDelay)
		if after := s.zone(t); !slices.Equal(before, after) {
			r.fail("the zones changed across a controller restart:\nbefore %v\nafter  %v", before, after)
		}
	})
	run("dns-foreign", func(r *dnsCase) {
		// A tenant's Ingress asks for every planted name: each is refused
		// (ForeignRecord) and left exactly as planted, while it asks and
		// after it is deleted, over many periodic passes.
		e.create(dnsIngress("planted", "internal", foreignNames(foreignRRs)...))
		e.eventually(60*time.Second, "a conflict Event", func(ctx context.Context) (bool, error) {
			return e.hasEvent(ctx, "planted", dns.ProblemForeignRecord), nil
		})
		time.Sleep(2 * dnsDelay)
		if err := e.cl.Delete(context.Background(), dnsIngress("planted", "internal")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * dnsDelay)
	})
	run("dns-ingress-deleted", func(r *dnsCase) {
		start := time.Now()
		if err := e.cl.Delete(context.Background(), dnsIngress("web", "internal")); err != nil {
			t.Fatal(err)
		}
		s.unwant("www." + corpZone)
		s.gone(e, r, "www."+corpZone, start)
		e.eventually(60*time.Second, "the ownership record gone", func(context.Context) (bool, error) {
			rrs, err := bind.Query(dns.OwnerName("www."+corpZone), mdns.TypeTXT)
			return err == nil && len(rrs) == 0, err
		})
	})
	run("dns-bind-down", func(r *dnsCase) {
		// BIND stops while a host leaves its Ingress: the controller fails,
		// retries with backoff, deletes nothing; once BIND is back, the
		// name is deleted only after the delete delay.
		before := e.dnsMetric(`sluice_dns_provider_errors_total{op="records"}`)
		bind.Stop()
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: appNS, Name: "shop"}}
		if err := e.update(ing, func() { ing.Spec.Rules[0].Host = "other." + publicZone }); err != nil {
			t.Fatal(err)
		}
		e.eventually(60*time.Second, "provider errors counted", func(context.Context) (bool, error) {
			return e.dnsMetric(`sluice_dns_provider_errors_total{op="records"}`) >= before+2, nil
		})
		time.Sleep(3 * dnsDelay)
		errs := e.dnsMetric(`sluice_dns_provider_errors_total{op="records"}`) - before
		bind.Restart()
		back := time.Now()
		t.Logf("dns-bind-down: %v of BIND down: %.0f failed zone reads (backoff 1s doubling to 1m)", 3*dnsDelay, errs)
		if got, err := values(bind, "store."+publicZone); err != nil || len(got) == 0 {
			r.fail("store.%s gone right after BIND came back: %v %v", publicZone, got, err)
		}
		s.unwant("store." + publicZone)
		r.publish = append(r.publish, s.resolves(e, "other."+publicZone, internetName, back))
		s.want("other." + publicZone)
		s.gone(e, r, "store."+publicZone, back)
	})
	if only.wants("dns-route53") {
		h.route53Case(t, s, run)
	}
}

// route53Case restarts the controller on the same cluster with Route53
// (the AWS fake, throttling half of all calls) and an AWS binding whose
// load balancer the controller discovers: the host gets ALIAS records to
// the NLB's name.
func (h *helmEnv) route53Case(t *testing.T, s *sampler, run func(string, func(*dnsCase))) {
	e := h.env
	f, err := awsfake.New(awsfake.Options{Speed: awsSpeed, Address: net.JoinHostPort(e.c.BridgeIP().String(), "0")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	tg, err := f.AddTargetGroup(awsfake.TargetGroup{Name: "sluice-dns", TargetType: "ip", Protocol: "TCP", Port: 8080,
		Tags: map[string]string{aws.OwnedTag: "true"}})
	if err != nil {
		t.Fatal(err)
	}
	nlb, err := f.AddLoadBalancer(awsfake.LoadBalancer{Name: "sluice-dns", TargetGroups: []string{tg}})
	if err != nil {
		t.Fatal(err)
	}
	zone, err := f.AddHostedZone("aws.test")
	if err != nil {
		t.Fatal(err)
	}
	// The zone's admin put records of every type beside sluice's; the
	// case's Ingress asks for them too.
	r53Foreign := []awsfake.RecordSet{
		{Name: "foreign-a.aws.test.", Type: "A", TTL: 300, Values: []string{"203.0.113.6"}},
		{Name: "foreign-aaaa.aws.test.", Type: "AAAA", TTL: 300, Values: []string{"2001:db8::6"}},
		{Name: "foreign-cname.aws.test.", Type: "CNAME", TTL: 300, Values: []string{"elsewhere.example.net."}},
		{Name: "foreign-txt.aws.test.", Type: "TXT", TTL: 300, Values: []string{`"v=spf1 -all"`}},
		{Name: "foreign-mx.aws.test.", Type: "MX", TTL: 300, Values: []string{"10 mail.example.net."}},
	}
	var r53Names []string
	for _, rs := range r53Foreign {
		if err := f.PutRecordSet(zone, rs); err != nil {
			t.Fatal(err)
		}
		r53Names = append(r53Names, strings.TrimSuffix(rs.Name, "."))
	}
	f.SetFaults(awsfake.Faults{Throttle: 0.5})
	// helm upgrade to Route53: the controller pods roll to the new flags.
	h.extra = append(h.extra, h.writeValues("values-route53.yaml", chartAWSValues(f.URL(), "--route53-endpoint="+f.URL())+`  dns:
    provider: route53
    zones: [aws.test]
`))
	h.helm(append([]string{"upgrade", release, h.chart, "-n", proxyNS}, h.valueFiles()...)...)
	h.settled(proxyNS, controllerName, 2*time.Minute)
	h.leader()
	s.use(func(name string) ([]string, error) {
		rs, ok := f.RecordSet(zone, name+".", "A")
		if !ok {
			return nil, nil
		}
		if rs.Alias != nil {
			return []string{strings.TrimSuffix(rs.Alias.DNSName, ".")}, nil
		}
		return rs.Values, nil
	})
	s.watchForeign(func() ([]string, error) {
		var out []string
		for _, rs := range f.RecordSets(zone) {
			if slices.Contains(r53Names, strings.TrimSuffix(rs.Name, ".")) {
				out = append(out, fmt.Sprintf("%s %s %d %v %+v", rs.Name, rs.Type, rs.TTL, rs.Values, rs.Alias))
			}
		}
		sort.Strings(out)
		return out, nil
	})
	if n := s.baselineSize(); n != len(r53Foreign) {
		t.Fatalf("the fake shows %d of the %d planted foreign record sets: foreign_touched could not fail", n, len(r53Foreign))
	}
	run("dns-route53", func(r *dnsCase) {
		off := false
		e.create(dnsClass("nlb"), &v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: "nlb"}, Spec: v1alpha1.LoadBalancerBindingSpec{
			Selector:      metav1.LabelSelector{MatchLabels: map[string]string{"sluice.dev/none": "nlb"}},
			Port:          intstr.FromInt32(8080),
			Provider:      v1alpha1.ProviderSpec{AWS: &v1alpha1.AWSProvider{TargetGroupARNs: []string{tg}}},
			ReadinessGate: &off,
			Drain:         v1alpha1.DrainSpec{Handshake: &off},
		}})
		start := time.Now()
		e.create(dnsIngress("api", "nlb", append([]string{"api.aws.test"}, r53Names...)...))
		r.publish = append(r.publish, s.resolves(e, "api.aws.test", nlb.DNSName, start))
		s.want("api.aws.test")
		e.eventually(60*time.Second, "a conflict Event for the foreign names", func(ctx context.Context) (bool, error) {
			return e.hasEvent(ctx, "api", dns.ProblemForeignRecord), nil
		})
		if rs, ok := f.RecordSet(zone, "api.aws.test.", "AAAA"); !ok || rs.Alias == nil || rs.Alias.HostedZoneID != nlb.CanonicalHostedZoneID {
			r.fail("AAAA ALIAS of api.aws.test = %+v, want to %s in %s", rs, nlb.DNSName, nlb.CanonicalHostedZoneID)
		}
		var b v1alpha1.LoadBalancerBinding
		if err := e.cl.Get(context.Background(), client.ObjectKey{Namespace: proxyNS, Name: "nlb"}, &b); err != nil || len(b.Status.Addresses) != 1 ||
			b.Status.Addresses[0].Hostname != nlb.DNSName || b.Status.Addresses[0].LoadBalancerARN != nlb.ARN {
			r.fail("binding status.addresses = %+v, want the NLB %+v", b.Status.Addresses, nlb)
		}
		time.Sleep(2 * dnsDelay)
		start = time.Now()
		if err := e.cl.Delete(context.Background(), dnsIngress("api", "nlb")); err != nil {
			t.Fatal(err)
		}
		s.unwant("api.aws.test")
		s.gone(e, r, "api.aws.test", start)
		e.eventually(60*time.Second, "the ownership record gone", func(context.Context) (bool, error) {
			_, ok := f.RecordSet(zone, dns.OwnerName("api.aws.test")+".", "TXT")
			return !ok, nil
		})
		t.Logf("dns-route53: AWS fake calls with throttling on: %v", f.Calls())
	})
}

// dnsMetric reads one sample of the controller's metrics (0 if absent).
func (e *env) dnsMetric(sample string) float64 {
	e.mu.Lock()
	addr := e.ctlAddr
	e.mu.Unlock()
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// dnsCase is one case's outcome.
type dnsCase struct {
	t                              *testing.T
	name                           string
	pass                           bool
	wronglyDeleted, foreignTouched int
	publish                        []time.Duration
}

func (r *dnsCase) fail(format string, args ...any) {
	r.t.Helper()
	r.pass = false
	r.t.Errorf("%s: "+format, append([]any{r.name}, args...)...)
}

func (r *dnsCase) String() string {
	p50 := "n/a"
	if len(r.publish) > 0 {
		d := slices.Clone(r.publish)
		slices.Sort(d)
		p50 = fmt.Sprintf("%.2fs", d[(len(d)-1)/2].Seconds())
	}
	return fmt.Sprintf("e2e %s: pass=%v wrongly_deleted=%d foreign_touched=%d publish_p50=%s", r.name, r.pass, r.wronglyDeleted, r.foreignTouched, p50)
}

func dnsClass(name string) *networkingv1.IngressClass {
	g, scope, ns := ingressstatus.ParametersAPIGroup, networkingv1.IngressClassParametersReferenceScopeNamespace, proxyNS
	return &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressClassSpec{
		Controller: "sluice.dev/ingress-controller",
		Parameters: &networkingv1.IngressClassParametersReference{APIGroup: &g, Kind: ingressstatus.ParametersKind, Scope: &scope, Namespace: &ns, Name: name},
	}}
}

func dnsIngress(name, class string, hosts ...string) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: appNS, Name: name}, Spec: networkingv1.IngressSpec{IngressClassName: &class}}
	for _, h := range hosts {
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: h})
	}
	return ing
}

// dnsBinding creates a binding on its own HAProxy backend that selects no
// pods: it only gives its class an address.
func (e *env) dnsBinding(name string, addr v1alpha1.PublishAddress) {
	e.t.Helper()
	off := false
	e.create(&v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: proxyNS, Name: name}, Spec: v1alpha1.LoadBalancerBindingSpec{
		Selector:      metav1.LabelSelector{MatchLabels: map[string]string{"sluice.dev/none": name}},
		Port:          intstr.FromInt32(8080),
		Provider:      v1alpha1.ProviderSpec{HAProxy: &v1alpha1.HAProxyProvider{RuntimeAPI: e.runtimeAPI(), Backend: name}},
		ReadinessGate: &off,
		Drain:         v1alpha1.DrainSpec{Handshake: &off},
		Publish:       []v1alpha1.PublishAddress{addr},
	}})
}

// resolves waits until name answers with want (an A address or a CNAME
// target) and returns the time since start.
func (sm *sampler) resolves(e *env, name, want string, start time.Time) time.Duration {
	e.t.Helper()
	var took time.Duration
	e.eventually(60*time.Second, name+" resolving to "+want, func(context.Context) (bool, error) {
		got, err := sm.get(name)
		if err == nil && slices.Contains(got, want) {
			took = time.Since(start)
			return true, nil
		}
		return false, err
	})
	return took
}

// gone waits until name no longer resolves, and checks that it stayed
// for the delete delay.
func (sm *sampler) gone(e *env, r *dnsCase, name string, start time.Time) {
	e.t.Helper()
	e.eventually(90*time.Second, name+" deleted", func(context.Context) (bool, error) {
		got, err := sm.get(name)
		return err == nil && len(got) == 0, err
	})
	if took := time.Since(start); took < dnsDelay {
		r.fail("%s deleted after %v, before the delete delay of %v", name, took, dnsDelay)
	}
}

// values are name's A addresses and CNAME targets (no trailing dot).
func values(s *bindtest.Server, name string) ([]string, error) {
	var out []string
	for _, typ := range []uint16{mdns.TypeA, mdns.TypeCNAME} {
		rrs, err := s.Query(name, typ)
		if err != nil {
			return nil, err
		}
		for _, rr := range rrs {
			if !strings.EqualFold(strings.TrimSuffix(rr.Header().Name, "."), name) {
				continue
			}
			switch v := rr.(type) {
			case *mdns.A:
				out = append(out, v.A.String())
			case *mdns.CNAME:
				out = append(out, strings.TrimSuffix(v.Target, "."))
			}
		}
	}
	return out, nil
}

func (e *env) hasEvent(ctx context.Context, ingress, reason string) bool {
	list, err := e.kube.EventsV1().Events(appNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, ev := range list.Items {
		if ev.Regarding.Name == ingress && ev.Reason == reason {
			return true
		}
	}
	return false
}

// sampler queries the wanted and foreign names continuously.
type sampler struct {
	s      *bindtest.Server
	mu     sync.Mutex
	lookup func(name string) ([]string, error) // BIND, or the Route53 fake
	wanted map[string]bool
	// foreign reads the foreign names' record sets whole; baseline is
	// its first answer.
	foreign  func() ([]string, error)
	baseline []string
	present  map[string]bool
	vanished map[string]int
	touched  int
	changed  []string // the foreign record sets when last found touched
	done     chan struct{}
	wg       sync.WaitGroup
}

func newSampler(s *bindtest.Server) *sampler {
	sm := &sampler{s: s, lookup: func(n string) ([]string, error) { return values(s, n) }, wanted: map[string]bool{}, present: map[string]bool{}, vanished: map[string]int{}, done: make(chan struct{})}
	sm.wg.Add(1)
	go sm.loop()
	return sm
}

func (sm *sampler) loop() {
	defer sm.wg.Done()
	for {
		select {
		case <-sm.done:
			return
		case <-time.After(100 * time.Millisecond):
		}
		sm.mu.Lock()
		lookup := sm.lookup
		names := make([]string, 0, len(sm.wanted))
		for n := range sm.wanted {
			names = append(names, n)
		}
		foreign, baseline := sm.foreign, sm.baseline
		sm.mu.Unlock()
		for _, n := range names {
			got, err := lookup(n)
			if err != nil {
				continue // the server, not the record
			}
			sm.mu.Lock()
			if sm.wanted[n] && sm.present[n] && len(got) == 0 {
				sm.vanished[n]++
			}
			sm.present[n] = len(got) > 0
			sm.mu.Unlock()
		}
		if foreign != nil {
			got, err := foreign()
			if err == nil && !slices.Equal(got, baseline) {
				sm.mu.Lock()
				sm.touched++
				sm.changed = got
				sm.mu.Unlock()
			}
		}
	}
}

// get looks name up as the sampler does.
func (sm *sampler) get(name string) ([]string, error) {
	sm.mu.Lock()
	lookup := sm.lookup
	sm.mu.Unlock()
	return lookup(name)
}

// use switches the sampler to another lookup and forgets the names.
func (sm *sampler) use(lookup func(string) ([]string, error)) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.lookup = lookup
	sm.wanted, sm.present = map[string]bool{}, map[string]bool{}
	sm.foreign, sm.baseline = nil, nil
}

func (sm *sampler) want(names ...string) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	for _, n := range names {
		sm.wanted[n] = true
	}
}

func (sm *sampler) unwant(names ...string) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	for _, n := range names {
		delete(sm.wanted, n)
		delete(sm.present, n)
	}
}

// watchForeign makes the sampler compare read's answer with its answer
// now, in every sample from here on.
func (sm *sampler) watchForeign(read func() ([]string, error)) {
	base, err := read()
	for i := 0; err != nil && i < 50; i++ { // the server still starting
		time.Sleep(100 * time.Millisecond)
		base, err = read()
	}
	if err != nil {
		panic(fmt.Sprintf("reading the foreign records: %v", err))
	}
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.foreign, sm.baseline = read, base
}

// bindRecords are the records of both zones in BIND, read whole by zone
// transfer (every type), rendered; with names, only the records of those
// names, sorted.
func bindRecords(s *bindtest.Server, names []string) ([]string, error) {
	p, err := rfc2136.New(rfc2136.Options{Server: s.Addr, Zones: []string{corpZone, publicZone}, KeyName: bindtest.KeyName, Secret: s.Secret})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, z := range []string{corpZone, publicZone} {
		recs, err := p.Records(context.Background(), dns.Zone{ID: z, Name: z})
		if err != nil {
			return nil, fmt.Errorf("reading zone %s: %w", z, err)
		}
		for _, r := range recs {
			if names == nil || slices.Contains(names, strings.TrimSuffix(strings.ToLower(r.Name), ".")) {
				out = append(out, r.String())
			}
		}
	}
	if names != nil {
		sort.Strings(out)
	}
	return out, nil
}

func (sm *sampler) reset() {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.vanished, sm.touched = map[string]int{}, 0
}

func (sm *sampler) counts() (vanished, touched int) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	for _, n := range sm.vanished {
		vanished += n
	}
	return vanished, sm.touched
}

func (sm *sampler) baselineSize() int {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return len(sm.baseline)
}

func (sm *sampler) lastChanged() []string {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return sm.changed
}

func (sm *sampler) vanishedNames() []string {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	var out []string
	for n := range sm.vanished {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (sm *sampler) stop() {
	close(sm.done)
	sm.wg.Wait()
}

// zone is the record sets of both zones, rendered, for before/after
// comparisons.
func (sm *sampler) zone(t *testing.T) []string {
	t.Helper()
	out, err := bindRecords(sm.s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dnsReconciled: the controller's metrics show a DNS reconcile that found
// published names.
func (e *env) dnsReconciled(context.Context) (bool, error) {
	return e.dnsMetric(`sluice_dns_names{state="published"}`) > 0, nil
}
