package dns_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/api/v1alpha1"
	ct "sluice.dev/sluice/internal/controller/controllertest"
	dnsctl "sluice.dev/sluice/internal/controller/dns"
	"sluice.dev/sluice/internal/controller/ingressstatus"
	"sluice.dev/sluice/internal/dns"
	"sluice.dev/sluice/internal/dns/dnstest"
)

const zone = "example.com"

// keys is the controllers' ownership key.
var keys, _ = dns.NewKeys([]byte("controller-test-ownership-key-32"))

type env struct {
	t     *testing.T
	c     client.WithWatch
	p     *dnstest.Memory
	rec   *ct.Recorder
	clock *ct.Clock
	reg   *prometheus.Registry
	r     *dnsctl.Reconciler
	opts  dnsctl.Options
}

func newEnv(t *testing.T, objs ...client.Object) *env {
	t.Helper()
	e := &env{t: t, p: dnstest.New(zone), clock: ct.NewClock()}
	e.c = ct.NewClient(interceptor.Funcs{}, objs...)
	e.opts = dnsctl.Options{OwnerID: "test", Keys: keys, TTL: 60 * time.Second, DeleteDelay: 2 * time.Minute,
		Serving: ingressstatus.ServingOptions{Namespace: ct.Namespace}}
	e.restart()
	return e
}

// restart replaces the reconciler, as a new controller process would.
func (e *env) restart() {
	e.t.Helper()
	e.rec, e.reg = &ct.Recorder{}, prometheus.NewRegistry()
	o := e.opts
	o.Client, o.Provider, o.Recorder, o.Registerer, o.Now = e.c, e.p, e.rec, e.reg, e.clock.Now
	o.Notices = &ct.Notices{Recorder: e.rec}
	r, err := dnsctl.New(o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.r = r
}

func (e *env) reconcile() (reconcile.Result, error) {
	return e.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "dns"}})
}

func (e *env) mustReconcile() reconcile.Result {
	e.t.Helper()
	res, err := e.reconcile()
	if err != nil {
		e.t.Fatalf("reconcile: %v", err)
	}
	return res
}

// a returns the A values of name, or nil.
func (e *env) a(name string) []string {
	if r := e.p.Get(zone, name, dns.TypeA); r != nil {
		return r.Values
	}
	return nil
}

func (e *env) owner(name string) *dns.Owner {
	r := e.p.Get(zone, dns.OwnerName(name), dns.TypeTXT)
	if r == nil {
		return nil
	}
	o, err := dns.ParseOwner(r.Values[0])
	if err != nil {
		e.t.Fatalf("ownership record of %s: %v", name, err)
	}
	return &o
}

func ingress(name string, hosts ...string) *networkingv1.Ingress {
	class := "sluice"
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: networkingv1.IngressSpec{IngressClassName: &class}}
	for _, h := range hosts {
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: h})
	}
	return ing
}

func lbBinding(ip string) *v1alpha1.LoadBalancerBinding {
	return ct.Binding("lb", ct.Publish(v1alpha1.PublishAddress{IP: ip}))
}

func TestPublishAndKeep(t *testing.T) {
	e := newEnv(t, ingress("web", "www.example.com", "WWW.example.com", "elsewhere.org"), lbBinding("192.0.2.10"))
	e.mustReconcile()
	if got := e.a("www.example.com"); len(got) != 1 || got[0] != "192.0.2.10" {
		t.Fatalf("A www.example.com = %v, want [192.0.2.10]", got)
	}
	if o := e.owner("www.example.com"); o == nil || o.ID != "test" || o.Ingress.String() != "app/web" || o.Ingress.UID != "uid-web" {
		t.Fatalf("ownership record = %+v", o)
	}
	ingObj := "*v1.Ingress app/web"
	if e.rec.Count(ingObj, "DNSPublished") != 1 || e.rec.Count(ingObj, dns.ProblemNoZone) != 1 {
		t.Errorf("events = %+v", e.rec.Events())
	}
	if n := metric(t, e.reg, "sluice_dns_publish_latency_seconds", ""); n != 1 {
		t.Errorf("publish latency observed %v times, want 1", n)
	}
	applies, _ := e.p.Calls()
	e.mustReconcile()
	if again, _ := e.p.Calls(); again != applies {
		t.Errorf("a second reconcile applied changes: %d → %d Apply calls", applies, again)
	}
	if len(e.rec.Events()) != 2 {
		t.Errorf("a second reconcile repeated Events: %+v", e.rec.Events())
	}

	// The binding goes away: nothing is deleted, and the Ingress is told why.
	if err := e.c.Delete(context.Background(), lbBinding("")); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	e.mustReconcile()
	e.restart() // and the controller restarts
	e.mustReconcile()
	if got := e.a("www.example.com"); len(got) != 1 {
		t.Fatalf("A www.example.com = %v after the binding was deleted, want it kept", got)
	}
	if e.owner("www.example.com").UnwantedSince != (time.Time{}) {
		t.Fatal("a host still in an Ingress was marked unwanted")
	}
	if e.rec.Count(ingObj, dns.ProblemUnknownAddress) != 1 {
		t.Errorf("no %s Event: %+v", dns.ProblemUnknownAddress, e.rec.Events())
	}
}

func TestDeleteAfterDelay(t *testing.T) {
	e := newEnv(t, ingress("web", "www.example.com", "old.example.com"), lbBinding("192.0.2.10"))
	e.mustReconcile()
	ing := &networkingv1.Ingress{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: "app", Name: "web"}, ing); err != nil {
		t.Fatal(err)
	}
	ing.Spec.Rules = ing.Spec.Rules[:1] // old.example.com leaves
	if err := e.c.Update(context.Background(), ing); err != nil {
		t.Fatal(err)
	}
	res := e.mustReconcile()
	if e.a("old.example.com") == nil {
		t.Fatal("old.example.com deleted at once, want after the delete delay")
	}
	if o := e.owner("old.example.com"); o == nil || !o.UnwantedSince.Equal(e.clock.Now().Truncate(time.Second)) {
		t.Fatalf("ownership record %+v not stamped with the time it became unwanted", o)
	}
	if res.RequeueAfter > 2*time.Minute {
		t.Errorf("requeue after %v, want by the end of the delete delay", res.RequeueAfter)
	}
	e.clock.Advance(time.Minute)
	e.mustReconcile()
	if e.a("old.example.com") == nil {
		t.Fatal("deleted before the delay was over")
	}
	// A restart starts the delay again: the stamp in the zone alone never
	// makes a deletion come sooner than a full delay after this process
	// saw the name unwanted.
	e.restart()
	e.clock.Advance(61 * time.Second)
	e.mustReconcile()
	if e.a("old.example.com") == nil {
		t.Fatal("deleted right after a restart, on the zone's stamp alone")
	}
	e.clock.Advance(2 * time.Minute)
	e.mustReconcile()
	if e.a("old.example.com") != nil || e.owner("old.example.com") != nil {
		t.Fatal("old.example.com and its ownership record still there after the delay")
	}
	if e.a("www.example.com") == nil {
		t.Fatal("www.example.com deleted")
	}
	// The Ingress is deleted: its names go after the delay too.
	if err := e.c.Delete(context.Background(), ing); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile()
	e.clock.Advance(3 * time.Minute)
	e.mustReconcile()
	if e.a("www.example.com") != nil || e.owner("www.example.com") != nil {
		t.Fatal("www.example.com still there after its Ingress was deleted and the delay passed")
	}
	// The deleted names are forgotten once the zone no longer holds them.
	e.mustReconcile()
	if n := e.r.ReportedNames(); n != 0 {
		t.Errorf("the reconciler still remembers reports for %d names after every name was deleted", n)
	}
}

func TestForeignRecordUntouched(t *testing.T) {
	e := newEnv(t, ingress("web", "planted.example.com"), lbBinding("192.0.2.10"))
	e.p.Set(zone, dns.Record{Name: "planted.example.com", Type: dns.TypeA, TTL: 300, Values: []string{"203.0.113.5"}})
	e.mustReconcile()
	e.mustReconcile()
	if got := e.a("planted.example.com"); len(got) != 1 || got[0] != "203.0.113.5" {
		t.Fatalf("foreign record = %v, want untouched", got)
	}
	if e.owner("planted.example.com") != nil {
		t.Fatal("an ownership record was written beside a foreign record")
	}
	if n := e.rec.Count("*v1.Ingress app/web", dns.ProblemForeignRecord); n != 1 {
		t.Errorf("%d ForeignRecord Events, want 1: %+v", n, e.rec.Events())
	}
	if v := metric(t, e.reg, "sluice_dns_names", dns.StateConflict); v != 1 {
		t.Errorf("conflict names = %v, want 1", v)
	}
}

// TestTwoForeignRecordsTwoEvents: an Ingress claiming two names held by
// foreign records gets a ForeignRecord Event for each (issue 28: they
// merged into one, which one being a race), once while they stand, and a
// Resolved Event for the one whose foreign record goes.
func TestTwoForeignRecordsTwoEvents(t *testing.T) {
	e := newEnv(t, ingress("web", "one.example.com", "two.example.com"), lbBinding("192.0.2.10"))
	for _, n := range []string{"one.example.com", "two.example.com"} {
		e.p.Set(zone, dns.Record{Name: n, Type: dns.TypeA, TTL: 300, Values: []string{"203.0.113.5"}})
	}
	e.mustReconcile()
	e.mustReconcile()
	notes := map[string]bool{}
	for _, ev := range e.rec.Events() {
		if ev.Reason == dns.ProblemForeignRecord {
			notes[ev.Note] = true
		}
	}
	if len(notes) != 2 || e.rec.Count("*v1.Ingress app/web", dns.ProblemForeignRecord) != 2 {
		t.Fatalf("ForeignRecord Events %+v, want one for each name", e.rec.Events())
	}
	e.p.Delete(zone, "two.example.com", dns.TypeA)
	e.mustReconcile()
	if n := e.rec.Count("*v1.Ingress app/web", "Resolved"); n != 1 {
		t.Errorf("%d Resolved Events after the foreign record of two.example.com went, want 1: %+v", n, e.rec.Events())
	}
}

func TestProviderDownDeletesNothing(t *testing.T) {
	e := newEnv(t, ingress("web", "www.example.com"), lbBinding("192.0.2.10"))
	e.mustReconcile()
	if err := e.c.Delete(context.Background(), ingress("web")); err != nil {
		t.Fatal(err)
	}
	e.p.Fail(errors.New("connection refused"))
	for range 3 {
		e.clock.Advance(time.Hour)
		if _, err := e.reconcile(); err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("reconcile with the provider down: %v, want its error (retried with backoff)", err)
		}
	}
	e.p.Fail(nil)
	if e.a("www.example.com") == nil {
		t.Fatal("a record was deleted while the provider was down")
	}
	if got := metric(t, e.reg, "sluice_dns_provider_errors_total", ""); got != 3 {
		t.Errorf("provider errors = %v, want 3", got)
	}
	// Back up: the name is stamped now and deleted only after the delay.
	e.mustReconcile()
	if e.a("www.example.com") == nil {
		t.Fatal("deleted at once after the provider came back, want after the delay")
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	e := newEnv(t, ingress("web", "www.example.com"), lbBinding("192.0.2.10"))
	e.opts.DryRun = true
	e.restart()
	e.mustReconcile()
	if applies, _ := e.p.Calls(); applies != 0 || e.a("www.example.com") != nil {
		t.Fatalf("dry run applied %d times", applies)
	}
}

func TestClassBindings(t *testing.T) {
	g, scope, ns := ingressstatus.ParametersAPIGroup, networkingv1.IngressClassParametersReferenceScopeNamespace, "edge"
	internal := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "internal"}, Spec: networkingv1.IngressClassSpec{
		Controller: "sluice.dev/ingress-controller",
		Parameters: &networkingv1.IngressClassParametersReference{APIGroup: &g, Kind: ingressstatus.ParametersKind, Scope: &scope, Namespace: &ns, Name: "internal"}}}
	ib := ct.Binding("internal", func(b *v1alpha1.LoadBalancerBinding) {
		b.Namespace = "edge"
		b.Status.Addresses = []v1alpha1.LoadBalancerAddress{{Hostname: "internal-lb.example.net"}}
	})
	ing := ingress("intra", "intra.example.com")
	c := "internal"
	ing.Spec.IngressClassName = &c
	e := newEnv(t, ingress("web", "www.example.com"), ing, internal, ib, lbBinding("192.0.2.10"))
	e.mustReconcile()
	if got := e.a("www.example.com"); len(got) != 1 || got[0] != "192.0.2.10" {
		t.Errorf("www = %v", got)
	}
	if r := e.p.Get(zone, "intra.example.com", dns.TypeCNAME); r == nil || r.Values[0] != "internal-lb.example.net" {
		t.Errorf("intra CNAME = %+v, want internal-lb.example.net", r)
	}
}

// metric adds up the samples of the metric name (histograms: their
// counts) whose labels include one with value label ("" for any).
func metric(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetValue() == label }) {
				continue
			}
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}
