//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
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
)

// TestDNS runs the DNS cases on one cluster, against a real BIND serving
// two zones, with the controller on the host (--dns-provider rfc2136):
//
//	Ingress (class internal | internet) ─► IngressClass parameters ─► binding ─► status.addresses
//	sluice controller ── signed AXFR / UPDATE ──► named 127.0.0.1 (corp.test, public.test)
//
// A sampler queries every wanted name every 100 ms during every case;
// wrongly_deleted counts names that stopped resolving while wanted. The
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
	bind := bindtest.Start(t, corpZone, publicZone)
	e := newCluster(t, "sld")
	e.backends = []string{"internal", "internet"}
	e.startHAProxy()
	secret := filepath.Join(e.dir, "tsig.secret")
	if err := os.WriteFile(secret, []byte(bind.Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ownershipKeys := filepath.Join(e.dir, "dns-ownership.keys")
	if err := os.WriteFile(ownershipKeys, []byte(bind.Secret+"\n"), 0o600); err != nil { // any 32 random bytes, base64
		t.Fatal(err)
	}
	e.ctlArgs = []string{"--dns-provider", "rfc2136", "--dns-zone", corpZone, "--dns-zone", publicZone,
		"--dns-owner-id", "e2e", "--dns-ttl", "5s", "--dns-delete-delay", dnsDelay.String(), "--dns-ownership-key-file", ownershipKeys,
		"--rfc2136-server", bind.Addr, "--rfc2136-tsig-key-name", bindtest.KeyName, "--rfc2136-tsig-secret-file", secret}
	e.startController()
	t.Cleanup(e.stopController)

	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}})
	e.create(dnsClass("internal"), dnsClass("internet"))
	e.dnsBinding("internal", v1alpha1.PublishAddress{IP: internalIP})
	e.dnsBinding("internet", v1alpha1.PublishAddress{Hostname: internetName})

	s := newSampler(bind)
	defer s.stop()
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
			r.fail("%d names vanished while wanted (%v), %d foreign records touched", r.wronglyDeleted, s.vanishedNames(), r.foreignTouched)
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
		e.killController()
		time.Sleep(2 * time.Second)
		e.startController()
		// The new process waits out the killed one's lease, then reconciles.
		e.eventually(90*time.Second, "the restarted controller reconciling DNS", e.dnsReconciled)
		time.Sleep(3 * dnsDelay)
		if after := s.zone(t); !slices.Equal(before, after) {
			r.fail("the zones changed across a controller restart:\nbefore %v\nafter  %v", before, after)
		}
	})
	run("dns-foreign", func(r *dnsCase) {
		name := "planted." + corpZone
		foreign := &dns.Record{Name: name, Type: dns.TypeA, TTL: 300, Values: []string{"203.0.113.5"}}
		p, err := rfc2136.New(rfc2136.Options{Server: bind.Addr, Zones: []string{corpZone}, KeyName: bindtest.KeyName, Secret: bind.Secret})
		if err != nil {
			t.Fatal(err)
		}
		if errs := p.Apply(context.Background(), dns.Zone{ID: corpZone, Name: corpZone}, []dns.Batch{{Name: name, Changes: []dns.Change{{New: foreign}}}}); errs[0] != nil {
			t.Fatalf("planting a foreign record: %v", errs[0])
		}
		s.foreign(name, "203.0.113.5")
		e.create(dnsIngress("planted", "internal", name))
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
		e.route53Case(t, s, run)
	}
}

// route53Case restarts the controller on the same cluster with Route53
// (the AWS fake, throttling half of all calls) and an AWS binding whose
// load balancer the controller discovers: the host gets ALIAS records to
// the NLB's name.
func (e *env) route53Case(t *testing.T, s *sampler, run func(string, func(*dnsCase))) {
	f, err := awsfake.New(awsfake.Options{Speed: awsSpeed})
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
	e.stopController()
	e.ctlArgs = []string{"--aws-endpoint", f.URL(), "--dns-provider", "route53", "--route53-endpoint", f.URL(),
		"--dns-zone", "aws.test", "--dns-owner-id", "e2e", "--dns-ttl", "5s", "--dns-delete-delay", dnsDelay.String(),
		"--dns-ownership-key-file", filepath.Join(e.dir, "dns-ownership.keys")}
	e.ctlEnv = fakeAWSEnv()
	f.SetFaults(awsfake.Faults{Throttle: 0.5})
	e.startController()
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
		e.create(dnsIngress("api", "nlb", "api.aws.test"))
		r.publish = append(r.publish, s.resolves(e, "api.aws.test", nlb.DNSName, start))
		s.want("api.aws.test")
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
		Provider:      v1alpha1.ProviderSpec{HAProxy: &v1alpha1.HAProxyProvider{RuntimeAPI: "unix://" + e.lbSock, Backend: name}},
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
	s        *bindtest.Server
	mu       sync.Mutex
	lookup   func(name string) ([]string, error) // BIND, or the Route53 fake
	wanted   map[string]bool
	foreigns map[string]string
	present  map[string]bool
	vanished map[string]int
	touched  int
	done     chan struct{}
	wg       sync.WaitGroup
}

func newSampler(s *bindtest.Server) *sampler {
	sm := &sampler{s: s, lookup: func(n string) ([]string, error) { return values(s, n) }, wanted: map[string]bool{}, foreigns: map[string]string{}, present: map[string]bool{}, vanished: map[string]int{}, done: make(chan struct{})}
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
		foreigns := make(map[string]string, len(sm.foreigns))
		for n, v := range sm.foreigns {
			foreigns[n] = v
		}
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
		for n, want := range foreigns {
			got, err := lookup(n)
			if err == nil && !slices.Equal(got, []string{want}) {
				sm.mu.Lock()
				sm.touched++
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
	sm.wanted, sm.present, sm.foreigns = map[string]bool{}, map[string]bool{}, map[string]string{}
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

func (sm *sampler) foreign(name, value string) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.foreigns[name] = value
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
	p, err := rfc2136.New(rfc2136.Options{Server: sm.s.Addr, Zones: []string{corpZone, publicZone}, KeyName: bindtest.KeyName, Secret: sm.s.Secret})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, z := range []string{corpZone, publicZone} {
		recs, err := p.Records(context.Background(), dns.Zone{ID: z, Name: z})
		if err != nil {
			t.Fatalf("reading zone %s: %v", z, err)
		}
		for _, r := range recs {
			out = append(out, r.String())
		}
	}
	return out
}

// dnsReconciled: the controller's metrics show a DNS reconcile that found
// published names.
func (e *env) dnsReconciled(context.Context) (bool, error) {
	return e.dnsMetric(`sluice_dns_names{state="published"}`) > 0, nil
}
