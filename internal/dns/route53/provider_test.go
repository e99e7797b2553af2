package route53

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"sluice.dev/sluice/internal/dns"
	"sluice.dev/sluice/internal/lb/aws/awsfake"
)

// These tests run the provider through the real SDK against the in-repo
// AWS fake's Route53 (in process, quick).

func newFake(t *testing.T, propagation time.Duration) *awsfake.Fake {
	t.Helper()
	f, err := awsfake.New(awsfake.Options{ChangePropagation: propagation})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// isolate keeps the machine's AWS settings out of the test.
func isolate(t *testing.T) {
	t.Helper()
	for k, v := range map[string]string{
		"AWS_CA_BUNDLE": "", "AWS_PROFILE": "", "AWS_REGION": "", "AWS_DEFAULT_REGION": "",
		"AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_ROUTE_53": "",
	} {
		t.Setenv(k, v)
	}
}

func newProvider(t *testing.T, f *awsfake.Fake, zones []string, mod ...func(*Options)) (*Provider, *answered) {
	t.Helper()
	isolate(t)
	count := &answered{n: map[string]int{}}
	o := Options{
		HTTPClient:        &http.Client{Transport: count},
		Endpoint:          f.URL(),
		Zones:             zones,
		Credentials:       credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		RequestsPerSecond: 1000,
		RetryBase:         time.Millisecond,
		MaxBackoff:        10 * time.Millisecond,
		PollInterval:      10 * time.Millisecond,
	}
	for _, m := range mod {
		m(&o)
	}
	p, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return p, count
}

func zone(t *testing.T, f *awsfake.Fake, name string) string {
	t.Helper()
	id, err := f.AddHostedZone(name)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestZones(t *testing.T) {
	f := newFake(t, -1)
	com := zone(t, f, "example.com")
	org := zone(t, f, "example.org")
	for i := range 150 { // the name lookup pages past these
		zone(t, f, fmt.Sprintf("z%03d.example.com", i))
	}
	p, count := newProvider(t, f, []string{"Example.com.", "/hostedzone/" + org, org})
	got, err := p.Zones(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []dns.Zone{{ID: com, Name: "example.com"}, {ID: org, Name: "example.org"}}
	if !slices.Equal(got, want) {
		t.Errorf("Zones = %v, want %v", got, want)
	}
	calls := count.get("ListHostedZonesByName")
	if _, err := p.Zones(context.Background()); err != nil || count.get("ListHostedZonesByName") != calls {
		t.Errorf("second Zones: %v, calls %d then %d; want no call", err, calls, count.get("ListHostedZonesByName"))
	}

	zone(t, f, "example.org") // a second zone of that name
	for _, tc := range []struct{ ref, want string }{
		{"missing.example.net", "no hosted zone named missing.example.net"},
		{"example.org", "2 hosted zones named example.org"},
		{"ZNOSUCHZONE", "NoSuchHostedZone"},
	} {
		p, _ := newProvider(t, f, []string{tc.ref})
		if _, err := p.Zones(context.Background()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Zones(%s) = %v, want %q", tc.ref, err, tc.want)
		}
	}
	if _, err := New(context.Background(), Options{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no zones: %v, want ErrInvalid", err)
	}
	if _, err := New(context.Background(), Options{Zones: []string{"bad name"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad zone: %v, want ErrInvalid", err)
	}
}

// records reads the zone through the provider, as a set of strings,
// without the zone's own SOA and NS sets at the apex.
func records(t *testing.T, p *Provider, z dns.Zone) []string {
	t.Helper()
	rs, err := p.Records(context.Background(), z)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		if r.Name == z.Name && (r.Type == "SOA" || r.Type == "NS") {
			continue
		}
		s := fmt.Sprintf("%s %s %d %v", r.Name, r.Type, r.TTL, r.Values)
		if r.Alias != nil {
			s = fmt.Sprintf("%s %s alias %s %s", r.Name, r.Type, r.Alias.HostedZoneID, r.Alias.DNSName)
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func resolved(t *testing.T, p *Provider) dns.Zone {
	t.Helper()
	zs, err := p.Zones(context.Background())
	if err != nil || len(zs) == 0 {
		t.Fatalf("Zones: %v, %v", zs, err)
	}
	return zs[0]
}

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for i, err := range errs {
		if err != nil {
			t.Errorf("batch %d: %v", i, err)
		}
	}
}

func TestApplyAndRecords(t *testing.T) {
	f := newFake(t, 100*time.Millisecond)
	zone(t, f, "example.com")
	tg, err := f.AddTargetGroup(awsfake.TargetGroup{Name: "tg"})
	if err != nil {
		t.Fatal(err)
	}
	nlb, err := f.AddLoadBalancer(awsfake.LoadBalancer{Name: "web", TargetGroups: []string{tg}})
	if err != nil {
		t.Fatal(err)
	}
	p, count := newProvider(t, f, []string{"example.com"})
	z := resolved(t, p)
	ctx := context.Background()

	alias := &dns.Record{Name: "*.apps.example.com", Type: dns.TypeA, Alias: &dns.Alias{DNSName: nlb.DNSName, HostedZoneID: nlb.CanonicalHostedZoneID}}
	owner := txt("*.apps.example.com", "heritage=sluice,owner=test")
	www := a("www.example.com", 60, "10.244.0.2", "10.244.0.1")
	noErrors(t, p.Apply(ctx, z, []dns.Batch{
		{Name: "*.apps.example.com", Changes: []dns.Change{{New: alias}, {New: owner}}},
		{Name: "www.example.com", Changes: []dns.Change{{New: www}}},
	}))
	// Apply waited for INSYNC: the fake answered PENDING at least once.
	if n := count.get("GetChange"); n < 2 {
		t.Errorf("GetChange calls = %d, want PENDING then INSYNC", n)
	}
	if n := count.get("ChangeResourceRecordSets"); n != 1 {
		t.Errorf("ChangeResourceRecordSets calls = %d, want 1 for both batches", n)
	}
	want := []string{
		"*.apps.example.com A alias " + nlb.CanonicalHostedZoneID + " " + nlb.DNSName,
		"*.apps.example.com TXT 60 [heritage=sluice,owner=test]",
		"www.example.com A 60 [10.244.0.1 10.244.0.2]",
	}
	if got := records(t, p, z); !slices.Equal(got, want) {
		t.Errorf("records %q\nwant    %q", got, want)
	}

	// Read back, changed with the compare-and-swap, deleted.
	rs, err := p.Records(ctx, z)
	if err != nil {
		t.Fatal(err)
	}
	var cur *dns.Record
	for _, r := range rs {
		if r.Name == "www.example.com" {
			cur = &r
		}
	}
	www2 := &dns.Record{Name: "www.example.com", Type: dns.TypeCNAME, TTL: 60, Values: []string{nlb.DNSName}}
	noErrors(t, p.Apply(ctx, z, []dns.Batch{
		{Name: "www.example.com", Changes: []dns.Change{{Old: cur, New: nil}, {New: www2}}},
		{Name: "*.apps.example.com", Changes: []dns.Change{{Old: alias}, {Old: owner}}},
	}))
	want = []string{"www.example.com CNAME 60 [" + nlb.DNSName + "]"}
	if got := records(t, p, z); !slices.Equal(got, want) {
		t.Errorf("records %q\nwant    %q", got, want)
	}
}

func TestConflict(t *testing.T) {
	f := newFake(t, -1)
	id := zone(t, f, "example.com")
	p, count := newProvider(t, f, []string{id})
	z := resolved(t, p)
	ctx := context.Background()
	noErrors(t, p.Apply(ctx, z, []dns.Batch{{Name: "a.example.com", Changes: []dns.Change{{New: a("a.example.com", 60, "10.244.0.1")}}}}))
	// Someone else changes the record after it was read.
	if err := f.PutRecordSet(id, awsfake.RecordSet{Name: "a.example.com", Type: "A", TTL: 60, Values: []string{"10.244.0.9"}}); err != nil {
		t.Fatal(err)
	}
	errs := p.Apply(ctx, z, []dns.Batch{
		{Name: "a.example.com", Changes: []dns.Change{{Old: a("a.example.com", 60, "10.244.0.1"), New: a("a.example.com", 60, "10.244.0.2")}}},
		{Name: "b.example.com", Changes: []dns.Change{{New: a("b.example.com", 60, "10.244.0.3")}}},
		{Name: "c.example.com", Changes: []dns.Change{{New: a("c.example.com", 60, "10.244.0.4")}}},
	})
	if !errors.Is(errs[0], dns.ErrConflict) {
		t.Errorf("changed under us: %v, want ErrConflict", errs[0])
	}
	noErrors(t, errs[1:])
	if rs, _ := f.RecordSet(id, "a.example.com", "A"); !slices.Equal(rs.Values, []string{"10.244.0.9"}) {
		t.Errorf("the other writer's record was overwritten: %v", rs.Values)
	}
	// Created by someone else since the plan: CREATE fails, a conflict.
	if err := f.PutRecordSet(id, awsfake.RecordSet{Name: "d.example.com", Type: "TXT", TTL: 60, Values: []string{`"theirs"`}}); err != nil {
		t.Fatal(err)
	}
	errs = p.Apply(ctx, z, []dns.Batch{{Name: "d.example.com", Changes: []dns.Change{{New: txt("d.example.com", "ours")}}}})
	if !errors.Is(errs[0], dns.ErrConflict) {
		t.Errorf("created under us: %v, want ErrConflict", errs[0])
	}
	if got := count.get("ChangeResourceRecordSets"); got != 1+3+1 {
		t.Errorf("ChangeResourceRecordSets calls = %d, want 5 (1; the rejected request of 3, then a alone and b+c; 1)", got)
	}
}

// TestInvalidBatchSplit: one bad batch (a CNAME at the apex, a CNAME beside
// another record, a duplicate) does not hold up the others.
func TestInvalidBatchSplit(t *testing.T) {
	f := newFake(t, -1)
	id := zone(t, f, "example.com")
	p, _ := newProvider(t, f, []string{"example.com"})
	z := resolved(t, p)
	if err := f.PutRecordSet(id, awsfake.RecordSet{Name: "taken.example.com", Type: "MX", TTL: 60, Values: []string{"10 mail.example.com."}}); err != nil {
		t.Fatal(err)
	}
	cname := func(name string) *dns.Record {
		return &dns.Record{Name: name, Type: dns.TypeCNAME, TTL: 60, Values: []string{"lb.example.org"}}
	}
	batches := []dns.Batch{
		{Name: "ok1.example.com", Changes: []dns.Change{{New: a("ok1.example.com", 60, "10.244.0.1")}}},
		{Name: "example.com", Changes: []dns.Change{{New: cname("example.com")}}},
		{Name: "taken.example.com", Changes: []dns.Change{{New: cname("taken.example.com")}}},
		{Name: "dup.example.com", Changes: []dns.Change{{New: a("dup.example.com", 60, "10.244.0.1")}, {New: a("dup.example.com", 60, "10.244.0.2")}}},
		{Name: "ok2.example.com", Changes: []dns.Change{{New: a("ok2.example.com", 60, "10.244.0.2")}}},
	}
	errs := p.Apply(context.Background(), z, batches)
	for i, want := range []string{"", "not permitted at apex", "conflicts with other records", "invalid set of changes", ""} {
		switch {
		case want == "" && errs[i] != nil:
			t.Errorf("%s: %v", batches[i].Name, errs[i])
		case want != "" && (errs[i] == nil || !strings.Contains(errs[i].Error(), want)):
			t.Errorf("%s: %v, want %q", batches[i].Name, errs[i], want)
		case want != "" && errors.Is(errs[i], dns.ErrConflict):
			t.Errorf("%s: %v is not a conflict", batches[i].Name, errs[i])
		}
	}
	want := []string{"ok1.example.com A 60 [10.244.0.1]", "ok2.example.com A 60 [10.244.0.2]", "taken.example.com MX 60 [10 mail.example.com.]"}
	if got := records(t, p, z); !slices.Equal(got, want) {
		t.Errorf("records %q, want %q", got, want)
	}
}

// TestSplitCost: one bad batch among 64 costs a few requests (halving),
// not one per batch.
func TestSplitCost(t *testing.T) {
	f := newFake(t, -1)
	zone(t, f, "example.com")
	p, count := newProvider(t, f, []string{"example.com"})
	z := resolved(t, p)
	var batches []dns.Batch
	for i := range 64 {
		name := fmt.Sprintf("n%02d.example.com", i)
		r := a(name, 60, "10.244.0.1")
		if i == 37 {
			r = &dns.Record{Name: "example.com", Type: dns.TypeCNAME, TTL: 60, Values: []string{"x.example.org"}} // at the apex
		}
		batches = append(batches, dns.Batch{Name: name, Changes: []dns.Change{{New: r}}})
	}
	errs := p.Apply(context.Background(), z, batches)
	for i, err := range errs {
		if (err != nil) != (i == 37) {
			t.Errorf("batch %d: %v", i, err)
		}
	}
	// 1 + 2 per halving (6 of them): 13.
	if n := count.get("ChangeResourceRecordSets"); n != 13 {
		t.Errorf("ChangeResourceRecordSets calls = %d, want 13", n)
	}
	if got := records(t, p, z); len(got) != 63 {
		t.Errorf("%d records, want 63", len(got))
	}
}

// TestLimitsAndPaging writes 1,500 names in requests within Route53's
// limits and reads them back through several pages.
func TestLimitsAndPaging(t *testing.T) {
	f := newFake(t, -1)
	zone(t, f, "example.com")
	p, count := newProvider(t, f, []string{"example.com"})
	z := resolved(t, p)
	var batches []dns.Batch
	for i := range 750 {
		name := fmt.Sprintf("h%04d.example.com", i)
		batches = append(batches, dns.Batch{Name: name, Changes: []dns.Change{
			{New: a(name, 60, "10.244.0.1")},
			{New: txt(name, fmt.Sprintf("heritage=sluice,owner=test,resource=ingress/default/h%04d", i))},
		}})
	}
	noErrors(t, p.Apply(context.Background(), z, batches))
	// 1,500 records: at least 2 requests; the TXT values (about 55
	// characters each) need at least 2 by the 32,000-character limit.
	if n := count.get("ChangeResourceRecordSets"); n < 2 || n > 3 {
		t.Errorf("ChangeResourceRecordSets calls = %d, want 2 or 3", n)
	}
	got := records(t, p, z)
	if len(got) != 1500 {
		t.Errorf("read %d records, want 1500", len(got))
	}
	if n := count.get("ListResourceRecordSets"); n != 6 {
		t.Errorf("ListResourceRecordSets calls = %d, want 6 (1502 sets, 300 a page)", n)
	}
}

func TestThrottlingRetried(t *testing.T) {
	f := newFake(t, 50*time.Millisecond)
	zone(t, f, "example.com")
	p, count := newProvider(t, f, []string{"example.com"})
	f.SetFaults(awsfake.Faults{Throttle: 0.3, PriorRequestNotComplete: 0.3})
	z := resolved(t, p)
	ctx := context.Background()
	for i := range 10 {
		name := fmt.Sprintf("n%d.example.com", i)
		noErrors(t, p.Apply(ctx, z, []dns.Batch{{Name: name, Changes: []dns.Change{{New: a(name, 60, "10.244.0.1")}}}}))
	}
	if got := records(t, p, z); len(got) != 10 {
		t.Errorf("records %q, want 10", got)
	}
	calls := count.get("ChangeResourceRecordSets")
	if calls <= 10 {
		t.Errorf("ChangeResourceRecordSets answers = %d: no retries seen", calls)
	}

	// Throttled past every attempt: an error, never a hang.
	f.SetFaults(awsfake.Faults{Throttle: 1, Actions: []string{"ChangeResourceRecordSets"}})
	p2, _ := newProvider(t, f, []string{"example.com"}, func(o *Options) { o.MaxAttempts = 3 })
	errs := p2.Apply(ctx, z, []dns.Batch{{Name: "x.example.com", Changes: []dns.Change{{New: a("x.example.com", 60, "10.244.0.1")}}}})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "Throttling") || errors.Is(errs[0], dns.ErrConflict) {
		t.Errorf("always throttled: %v", errs[0])
	}
}

// TestRateLimit counts requests at the HTTP client: they go out no faster
// than the bucket allows (a slow machine only sends them slower).
func TestRateLimit(t *testing.T) {
	f := newFake(t, -1)
	zone(t, f, "example.com")
	var (
		mu    sync.Mutex
		times []time.Time
	)
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		times = append(times, time.Now())
		mu.Unlock()
		return http.DefaultTransport.RoundTrip(r)
	})}
	p, _ := newProvider(t, f, []string{"example.com"}, func(o *Options) { o.RequestsPerSecond = 20; o.HTTPClient = hc })
	z := resolved(t, p)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 8 {
				if _, err := p.Records(context.Background(), z); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	// At 20/s with a burst of 1, n requests span at least (n-1)/20 s;
	// scheduling delays on a busy machine may shift a timestamp by a
	// little, hence the margin of 2. Without the bucket, the 33 requests
	// would go out within milliseconds.
	span := times[len(times)-1].Sub(times[0]).Seconds()
	if n := len(times); float64(n) > 20*span+3 {
		t.Errorf("%d requests within %.2fs, want at most 20/s", n, span)
	}
}

// answered counts the answers the provider received, per operation. Tests
// count these rather than the requests the fake received: the SDK
// transparently retries the odd lost connection.
type answered struct {
	mu sync.Mutex
	n  map[string]int
}

func (a *answered) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		a.mu.Lock()
		a.n[operation(r)]++
		a.mu.Unlock()
	}
	return resp, err
}

func (a *answered) get(op string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[op]
}

// operation names the Route53 operation of a request.
func operation(r *http.Request) string {
	parts := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, "/2013-04-01/"), "/"), "/")
	switch {
	case r.Method == http.MethodPost:
		return "ChangeResourceRecordSets"
	case parts[0] == "hostedzonesbyname":
		return "ListHostedZonesByName"
	case parts[0] == "change":
		return "GetChange"
	case len(parts) == 1:
		return "ListHostedZones"
	case len(parts) == 2:
		return "GetHostedZone"
	default:
		return "ListResourceRecordSets"
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestWaitEndsWithContext(t *testing.T) {
	f := newFake(t, time.Hour)
	zone(t, f, "example.com")
	p, _ := newProvider(t, f, []string{"example.com"})
	z := resolved(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	errs := p.Apply(ctx, z, []dns.Batch{{Name: "x.example.com", Changes: []dns.Change{{New: a("x.example.com", 60, "10.244.0.1")}}}})
	if !errors.Is(errs[0], context.DeadlineExceeded) || !strings.Contains(errs[0].Error(), "INSYNC") {
		t.Errorf("never INSYNC: %v, want the deadline while waiting", errs[0])
	}
}

// TestRoute53Down: with the endpoint gone, every call fails after its
// retries, with an error and never an empty answer.
func TestRoute53Down(t *testing.T) {
	f := newFake(t, -1)
	zone(t, f, "example.com")
	p, _ := newProvider(t, f, []string{"example.com"}, func(o *Options) { o.MaxAttempts = 2 })
	z := resolved(t, p)
	f.Close()
	ctx := context.Background()
	if rs, err := p.Records(ctx, z); err == nil || rs != nil {
		t.Errorf("Records = %v, %v; want an error and nothing", rs, err)
	}
	errs := p.Apply(ctx, z, []dns.Batch{
		{Name: "a.example.com", Changes: []dns.Change{{New: a("a.example.com", 60, "10.244.0.1")}}},
		{Name: "b.example.com", Changes: []dns.Change{{Old: a("b.example.com", 60, "10.244.0.1")}}},
	})
	for i, err := range errs {
		if err == nil || errors.Is(err, dns.ErrConflict) {
			t.Errorf("batch %d: %v, want an error that is not a conflict", i, err)
		}
	}
	p2, _ := newProvider(t, f, []string{"example.com"}, func(o *Options) { o.MaxAttempts = 2 })
	if zs, err := p2.Zones(ctx); err == nil || zs != nil {
		t.Errorf("Zones = %v, %v; want an error", zs, err)
	}
}
