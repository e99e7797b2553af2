package aws

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/lb/aws/awsfake"
	"sluice.dev/sluice/internal/targets"
)

const speed = 50

func newFake(t *testing.T) *awsfake.Fake {
	t.Helper()
	f, err := awsfake.New(awsfake.Options{Speed: speed, Networks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// newGroup creates a target group with fast, AWS-shaped timings (at 50×:
// checks every 100ms, healthy after 2, draining for 200ms).
func newGroup(t *testing.T, f *awsfake.Fake, tg awsfake.TargetGroup) string {
	t.Helper()
	if tg.Name == "" {
		tg.Name = "tg-" + fmt.Sprint(time.Now().UnixNano())
	}
	tg.HealthCheckPath = "/healthz"
	tg.HealthCheckInterval = 5 * time.Second
	tg.HealthyThreshold, tg.UnhealthyThreshold = 2, 2
	if tg.DeregistrationDelay == 0 {
		tg.DeregistrationDelay = 10 * time.Second
	}
	arn, err := f.AddTargetGroup(tg)
	if err != nil {
		t.Fatal(err)
	}
	return arn
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newProvider(t *testing.T, f *awsfake.Fake, mod ...func(*Options)) *Provider {
	t.Helper()
	isolate(t)
	o := Options{
		Region:      "us-east-1",
		Endpoint:    f.URL(),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		RetryBase:   time.Millisecond,
		MaxBackoff:  10 * time.Millisecond,
		WriteRate:   1000,
		ReadRate:    1000,
		FastTTL:     time.Nanosecond, // tests poll; caching has its own test
		SlowTTL:     time.Nanosecond,
	}
	for _, m := range mod {
		m(&o)
	}
	p, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// isolate keeps the machine's AWS settings out of the test (and the
// instance metadata service, which is not on 127.0.0.0/8, unasked).
func isolate(t *testing.T) {
	t.Helper()
	for k, v := range map[string]string{
		"AWS_CA_BUNDLE": "", "AWS_PROFILE": "", "AWS_REGION": "", "AWS_DEFAULT_REGION": "",
		"AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2": "",
	} {
		t.Setenv(k, v)
	}
}

// answered counts the provider's API attempts of op with this outcome
// ("ok", an AWS error code). Tests count these rather than requests the
// fake received: the SDK transparently retries the odd connection error.
func answered(p *Provider, op, outcome string) int {
	return int(testutil.ToFloat64(p.metrics.requests.WithLabelValues(op, outcome)))
}

// backend is an HTTP target on 127.0.0.1 whose /healthz answers 200 while
// healthy is true, 503 otherwise.
func backend(t *testing.T) (netip.AddrPort, *atomic.Bool) {
	t.Helper()
	var healthy atomic.Bool
	healthy.Store(true)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" && !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(s.Close)
	return netip.MustParseAddrPort(s.Listener.Addr().String()), &healthy
}

// until polls Targets until cond holds, recording each change of target
// tgt's state (absent: ""). The deadline only bounds a hung test.
func until(t *testing.T, p *Provider, arn string, tgt lb.Target, cond func([]lb.Status) bool) []lb.State {
	t.Helper()
	var seen []lb.State
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := p.Targets(context.Background(), arn)
		if err != nil {
			t.Fatalf("Targets: %v", err)
		}
		var s lb.State
		for _, x := range st {
			if x.Target.Same(tgt) {
				s = x.State
			}
		}
		if len(seen) == 0 || seen[len(seen)-1] != s {
			seen = append(seen, s)
		}
		if cond(st) {
			return seen
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not reached; states seen %v, last listing %+v", seen, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func stateIs(tgt lb.Target, want lb.State) func([]lb.Status) bool {
	return func(st []lb.Status) bool {
		for _, x := range st {
			if x.Target.Same(tgt) {
				return x.State == want
			}
		}
		return want == ""
	}
}

func TestRegisterInitialThenHealthyThenDrained(t *testing.T) {
	f := newFake(t)
	arn := newGroup(t, f, awsfake.TargetGroup{})
	p := newProvider(t, f)
	ap, _ := backend(t)
	tgt := lb.Target{Address: ap, Zone: "us-east-1a"}
	ctx := context.Background()

	if err := p.Register(ctx, arn, []lb.Target{tgt}); err != nil {
		t.Fatal(err)
	}
	seen := until(t, p, arn, tgt, stateIs(tgt, lb.Healthy))
	if want := []lb.State{lb.Initial, lb.Healthy}; !slices.Equal(seen, want) {
		t.Fatalf("states %v, want %v", seen, want)
	}
	// Registering again is a no-op that keeps the health.
	if err := p.Register(ctx, arn, []lb.Target{tgt}); err != nil {
		t.Fatal(err)
	}
	st, err := p.Targets(ctx, arn)
	if err != nil || len(st) != 1 || st[0].State != lb.Healthy || st[0].Target.Zone != "us-east-1a" {
		t.Fatalf("after re-register: %+v, %v", st, err)
	}

	if err := p.Deregister(ctx, arn, []lb.Target{tgt}); err != nil {
		t.Fatal(err)
	}
	seen = until(t, p, arn, tgt, func(st []lb.Status) bool {
		// The controller re-issues Deregister on every reconcile.
		if err := p.Deregister(ctx, arn, []lb.Target{tgt}); err != nil {
			t.Fatal(err)
		}
		return len(st) == 0
	})
	if want := []lb.State{lb.Draining, ""}; !slices.Equal(seen, want) {
		t.Fatalf("states %v, want %v", seen, want)
	}
	if answered(p, "RegisterTargets", "ok") != 1 || answered(p, "DeregisterTargets", "ok") != 1 {
		t.Fatalf("calls %v: want one RegisterTargets and one DeregisterTargets", f.Calls())
	}
	if got := f.Targets(arn); len(got) != 0 {
		t.Fatalf("fake still holds %+v", got)
	}
}

func TestUnhealthyTarget(t *testing.T) {
	f := newFake(t)
	arn := newGroup(t, f, awsfake.TargetGroup{Protocol: "HTTP"})
	p := newProvider(t, f)
	ap, healthy := backend(t)
	healthy.Store(false)
	tgt := lb.Target{Address: ap}
	if err := p.Register(context.Background(), arn, []lb.Target{tgt}); err != nil {
		t.Fatal(err)
	}
	seen := until(t, p, arn, tgt, stateIs(tgt, lb.Unhealthy))
	if want := []lb.State{lb.Initial, lb.Unhealthy}; !slices.Equal(seen, want) {
		t.Fatalf("states %v, want %v", seen, want)
	}
	st, _ := p.Targets(context.Background(), arn)
	if st[0].Reason != "Target.ResponseCodeMismatch" {
		t.Fatalf("reason %q", st[0].Reason)
	}
	healthy.Store(true)
	until(t, p, arn, tgt, stateIs(tgt, lb.Healthy))
}

// targets returns n distinct targets on one backend's IP range
// (127.0.0.x, all pointing to live health endpoints via distinct ports is
// not needed: unhealthy is fine for counting).
func manyTargets(t *testing.T, n int) []lb.Target {
	t.Helper()
	ap, _ := backend(t)
	out := make([]lb.Target, n)
	for i := range out {
		out[i] = lb.Target{Address: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, byte(1 + i)}), ap.Port())}
	}
	return out
}

func TestThrottlingHalfTheCallsConverges(t *testing.T) {
	f := newFake(t)
	arn := newGroup(t, f, awsfake.TargetGroup{})
	p := newProvider(t, f, func(o *Options) { o.BatchSize = 7 })
	f.SetFaults(awsfake.Faults{Throttle: 0.5})
	ts := manyTargets(t, 30)
	ctx := context.Background()
	if err := p.Register(ctx, arn, ts); err != nil {
		t.Fatal(err)
	}
	st, err := p.Targets(ctx, arn)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 30 {
		t.Fatalf("listed %d targets, want 30", len(st))
	}
	held := f.Targets(arn)
	if len(held) != 30 {
		t.Fatalf("fake holds %d targets, want 30", len(held))
	}
	for i, h := range held {
		if i > 0 && held[i-1].ID == h.ID && held[i-1].Port == h.Port {
			t.Fatalf("duplicate target %+v", h)
		}
	}
	// 5 batches, each first attempt throttled.
	if ok, thr := answered(p, "RegisterTargets", "ok"), answered(p, "RegisterTargets", "Throttling"); ok != 5 || thr < 5 {
		t.Fatalf("RegisterTargets answered ok %d, throttled %d; want 5 and at least 5", ok, thr)
	}
	if err := p.Deregister(ctx, arn, ts); err != nil {
		t.Fatal(err)
	}
	until(t, p, arn, ts[0], func(st []lb.Status) bool { return len(st) == 0 })
	if got := f.Targets(arn); len(got) != 0 {
		t.Fatalf("fake still holds %d targets", len(got))
	}
}

func TestServerErrorsRetried(t *testing.T) {
	f := newFake(t)
	arn := newGroup(t, f, awsfake.TargetGroup{})
	p := newProvider(t, f)
	f.SetFaults(awsfake.Faults{ServerError: 0.5, Actions: []string{"RegisterTargets", "DescribeTargetHealth"}})
	ts := manyTargets(t, 3)
	if err := p.Register(context.Background(), arn, ts); err != nil {
		t.Fatal(err)
	}
	st, err := p.Targets(context.Background(), arn)
	if err != nil || len(st) != 3 {
		t.Fatalf("Targets: %d, %v", len(st), err)
	}
	if ok, failed := answered(p, "RegisterTargets", "ok"), answered(p, "RegisterTargets", "InternalFailure"); ok != 1 || failed < 1 {
		t.Fatalf("RegisterTargets answered ok %d, failed %d; want 1 and at least 1", ok, failed)
	}
}

func TestListingErrorIsNeverAnEmptyList(t *testing.T) {
	f := newFake(t)
	arn := newGroup(t, f, awsfake.TargetGroup{})
	p := newProvider(t, f, func(o *Options) { o.MaxAttempts = 3 })
	ts := manyTargets(t, 2)
	ctx := context.Background()
	if err := p.Register(ctx, arn, ts); err != nil {
		t.Fatal(err)
	}
	for _, fault := range []awsfake.Faults{
		{ServerError: 1, Actions: []string{"DescribeTargetHealth"}},
		{Throttle: 1, Actions: []string{"DescribeTargetHealth"}},
	} {
		f.SetFaults(fault)
		st, err := p.Targets(ctx, arn)
		if err == nil || st != nil {
			t.Fatalf("%+v: Targets = %v, %v; want nil and an error", fault, st, err)
		}
		if !errors.Is(err, lb.ErrUnreachable) {
			t.Fatalf("%+v: error %v, want lb.ErrUnreachable", fault, err)
		}
	}
	f.SetFaults(awsfake.Faults{})
	st, err := p.Targets(ctx, arn)
	if err != nil || len(st) != 2 {
		t.Fatalf("after recovery: %d targets, %v", len(st), err)
	}
	if got := len(f.Targets(arn)); got != 2 {
		t.Fatalf("fake holds %d targets, want 2", got)
	}
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	isolate(t)
	p, err := New(context.Background(), Options{
		Region: "us-east-1", Endpoint: "http://" + addr, MaxAttempts: 2, RetryBase: time.Millisecond,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Targets(context.Background(), "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/x/0123456789abcdef")
	if !errors.Is(err, lb.ErrUnreachable) {
		t.Fatalf("error %v, want lb.ErrUnreachable", err)
	}
}

func TestGroupErrors(t *testing.T) {
	f := newFake(t)
	p := newProvider(t, f)
	ctx := context.Background()
	missing := "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/missing/0123456789abcdef"
	if _, err := p.Targets(ctx, missing); !errors.Is(err, lb.ErrGroupNotFound) {
		t.Fatalf("missing group: %v", err)
	}
	if err := p.Register(ctx, missing, manyTargets(t, 1)); !errors.Is(err, lb.ErrGroupNotFound) {
		t.Fatalf("missing group: %v", err)
	}
	for _, bad := range []string{"", "backend", "arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/app/x/1"} {
		if _, err := p.Targets(ctx, bad); !errors.Is(err, lb.ErrInvalid) {
			t.Fatalf("%q: %v", bad, err)
		}
	}
	if calls := f.Calls(); calls["DescribeTargetHealth"] != 0 {
		t.Fatalf("calls %v", calls)
	}
	// A target outside the fake's networks is refused by the API.
	arn := newGroup(t, f, awsfake.TargetGroup{})
	err := p.Register(ctx, arn, []lb.Target{{Address: netip.MustParseAddrPort("192.0.2.1:80")}})
	if !errors.Is(err, lb.ErrInvalid) {
		t.Fatalf("outside address: %v", err)
	}
}

func TestInstanceTargets(t *testing.T) {
	f := newFake(t)
	arn := newGroup(t, f, awsfake.TargetGroup{TargetType: "instance"})
	p := newProvider(t, f)
	ap, _ := backend(t)
	if err := f.AddInstance("i-0123456789abcdef0", ap.Addr()); err != nil {
		t.Fatal(err)
	}
	tgt := lb.Target{ID: "i-0123456789abcdef0", Address: ap}
	ctx := context.Background()
	if err := p.Register(ctx, arn, []lb.Target{tgt}); err != nil {
		t.Fatal(err)
	}
	until(t, p, arn, tgt, stateIs(tgt, lb.Healthy))
	st, _ := p.Targets(ctx, arn)
	if len(st) != 1 || st[0].Target != tgt {
		t.Fatalf("listed %+v, want %+v", st, tgt)
	}
	if held := f.Targets(arn); len(held) != 1 || held[0].ID != tgt.ID || held[0].Port != int(ap.Port()) {
		t.Fatalf("fake holds %+v", held)
	}
	// An IP without an instance ID cannot go into an instance group.
	if err := p.Register(ctx, arn, []lb.Target{{Address: ap}}); !errors.Is(err, lb.ErrInvalid) {
		t.Fatalf("no ID: %v", err)
	}
	// Deregistering by ID and port.
	if err := p.Deregister(ctx, arn, []lb.Target{{ID: tgt.ID, Address: netip.AddrPortFrom(netip.Addr{}, ap.Port())}}); err != nil {
		t.Fatal(err)
	}
	until(t, p, arn, tgt, func(st []lb.Status) bool { return len(st) == 0 })
}

func TestOwnership(t *testing.T) {
	f := newFake(t)
	shared := newGroup(t, f, awsfake.TargetGroup{})
	owned := newGroup(t, f, awsfake.TargetGroup{Tags: map[string]string{OwnedTag: "true"}})
	other := newProvider(t, f) // another process registers its own target
	ctx := context.Background()
	ts := manyTargets(t, 2)
	foreign, mine := ts[0], ts[1]
	for _, arn := range []string{shared, owned} {
		if err := other.Register(ctx, arn, []lb.Target{foreign}); err != nil {
			t.Fatal(err)
		}
	}

	p := newProvider(t, f)
	for _, arn := range []string{shared, owned} {
		if err := p.Register(ctx, arn, []lb.Target{mine}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := p.Targets(ctx, shared)
	if err != nil || len(st) != 1 || !st[0].Target.Same(mine) {
		t.Fatalf("shared group lists %+v, %v; want only ours", st, err)
	}
	// Deregistering someone else's target in a shared group is ignored.
	if err := p.Deregister(ctx, shared, []lb.Target{foreign}); err != nil {
		t.Fatal(err)
	}
	if f.Calls()["DeregisterTargets"] != 0 {
		t.Fatal("deregistered a foreign target")
	}
	st, err = p.Targets(ctx, owned)
	if err != nil || len(st) != 2 {
		t.Fatalf("owned group lists %+v, %v; want both", st, err)
	}
	// A restarted process adopts what it persisted.
	p2 := newProvider(t, f)
	if st, _ := p2.Targets(ctx, shared); len(st) != 0 {
		t.Fatalf("new process lists %+v in a shared group", st)
	}
	if err := p2.Adopt(ctx, shared, []lb.Target{mine}); err != nil {
		t.Fatal(err)
	}
	if st, _ := p2.Targets(ctx, shared); len(st) != 1 || !st[0].Target.Same(mine) {
		t.Fatalf("after adopt: %+v", st)
	}
}

func TestCachedListing(t *testing.T) {
	f := newFake(t)
	arn := newGroup(t, f, awsfake.TargetGroup{})
	c := &clock{now: time.Unix(1e9, 0)}
	p := newProvider(t, f, func(o *Options) {
		o.Now, o.FastTTL, o.SlowTTL = c.Now, time.Second, 10*time.Second
	})
	ctx := context.Background()
	ap, _ := backend(t)
	tgt := lb.Target{Address: ap}
	describes := func() int { return answered(p, "DescribeTargetHealth", "ok") }

	for range 3 {
		if _, err := p.Targets(ctx, arn); err != nil {
			t.Fatal(err)
		}
	}
	if got := describes(); got != 1 {
		t.Fatalf("%d DescribeTargetHealth for 3 listings within the TTL, want 1", got)
	}
	// Register updates the cache: the target is listed as initial at once.
	if err := p.Register(ctx, arn, []lb.Target{tgt}); err != nil {
		t.Fatal(err)
	}
	st, _ := p.Targets(ctx, arn)
	if len(st) != 1 || st[0].State != lb.Initial || describes() != 1 {
		t.Fatalf("after register: %+v, %d describes", st, describes())
	}
	// Transitional: refreshed after FastTTL until healthy.
	for st[0].State != lb.Healthy {
		n := describes()
		c.Add(time.Second)
		st, _ = p.Targets(ctx, arn)
		if describes() != n+1 {
			t.Fatalf("no refresh after FastTTL while %s", st[0].State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Stable: FastTTL no longer refreshes, SlowTTL does.
	n := describes()
	c.Add(time.Second)
	p.Targets(ctx, arn)
	if describes() != n {
		t.Fatal("refreshed after FastTTL while stable")
	}
	c.Add(9 * time.Second)
	p.Targets(ctx, arn)
	if describes() != n+1 {
		t.Fatal("no refresh after SlowTTL")
	}
	// Concurrent listings share a refresh.
	c.Add(10 * time.Second)
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() { p.Targets(ctx, arn) })
	}
	wg.Wait()
	if describes() != n+2 {
		t.Fatalf("%d refreshes for 5 concurrent listings, want 1", describes()-n-1)
	}
}

func TestDiscover(t *testing.T) {
	f := newFake(t)
	p := newProvider(t, f)
	var want []string
	for i := range 430 { // more than one page of 400
		tags := map[string]string{ClusterTag: "prod", FrontendTag: fmt.Sprint("fe", i%3)}
		if i%100 == 7 {
			tags[FrontendTag] = "web"
		}
		arn, err := f.AddTargetGroup(awsfake.TargetGroup{Name: fmt.Sprint("g", i), Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		if i%100 == 7 {
			want = append(want, arn)
		}
	}
	if _, err := f.AddTargetGroup(awsfake.TargetGroup{Name: "other", Tags: map[string]string{ClusterTag: "dev", FrontendTag: "web"}}); err != nil {
		t.Fatal(err)
	}
	got, err := p.Discover(context.Background(), "prod", "web")
	slices.Sort(want)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Discover = %v, %v; want %v", got, err, want)
	}
	if answered(p, "DescribeTargetGroups", "ok") != 2 || answered(p, "DescribeTags", "ok") != 22 {
		c := f.Calls()
		t.Fatalf("calls %v: want 2 pages and 22 tag batches", c)
	}
	if got, err := p.Discover(context.Background(), "prod", "none"); err != nil || len(got) != 0 {
		t.Fatalf("no match: %v, %v", got, err)
	}
}

func TestCheckDeregistrationDelay(t *testing.T) {
	f := newFake(t)
	arn := newGroup(t, f, awsfake.TargetGroup{DeregistrationDelay: 300 * time.Second})
	p := newProvider(t, f)
	ctx := context.Background()
	err := p.Check(ctx, arn, 30*time.Second)
	var de *DelayError
	if !errors.Is(err, ErrDelayTooLong) || !errors.As(err, &de) || de.Delay != 300*time.Second {
		t.Fatalf("Check = %v", err)
	}
	if err := p.Check(ctx, arn, 330*time.Second); err != nil {
		t.Fatalf("grace covers delay+margin: %v", err)
	}
	if err := f.SetDeregistrationDelay(arn, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.Check(ctx, arn, 30*time.Second); !errors.Is(err, ErrDelayTooLong) {
		t.Fatalf("20s + 15s margin > 30s: %v", err)
	}
	if err := p.Check(ctx, arn, 35*time.Second); err != nil {
		t.Fatalf("20s + 15s margin = 35s: %v", err)
	}
	if err := p.Check(ctx, "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/x/1", time.Minute); !errors.Is(err, lb.ErrGroupNotFound) {
		t.Fatalf("missing group: %v", err)
	}
}

func TestRateLimit(t *testing.T) {
	f := newFake(t)
	arn := newGroup(t, f, awsfake.TargetGroup{})
	// One write per 100s: the first call takes the only token; the second
	// would have to wait past its deadline, so it fails without a call.
	p := newProvider(t, f, func(o *Options) { o.WriteRate, o.BatchSize = 0.01, 1 })
	ts := manyTargets(t, 2)
	if err := p.Register(context.Background(), arn, ts[:1]); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Register(ctx, arn, ts[1:]); err == nil {
		t.Fatal("second write within the rate limit was sent")
	}
	if got := answered(p, "RegisterTargets", "ok"); got != 1 || len(f.Targets(arn)) != 1 {
		t.Fatalf("RegisterTargets answered %d, fake holds %v; want 1", got, f.Targets(arn))
	}
	// Reads have their own budget.
	if _, err := p.Targets(context.Background(), arn); err != nil {
		t.Fatal(err)
	}
}

// TestControllerLoopUnderThrottling runs the controller's read → diff →
// apply loop (targets.Diff) against the provider while half of all API
// calls are throttled, through a scale-up and a replacement of half the
// targets: the group ends holding exactly the desired targets, each once.
func TestControllerLoopUnderThrottling(t *testing.T) {
	f := newFake(t)
	arn := newGroup(t, f, awsfake.TargetGroup{})
	p := newProvider(t, f, func(o *Options) { o.BatchSize = 3 })
	f.SetFaults(awsfake.Faults{Throttle: 0.5})
	all := manyTargets(t, 15)
	ctx := context.Background()
	converge := func(desired []lb.Target) {
		t.Helper()
		for round := 0; ; round++ {
			if round > 2000 {
				t.Fatal("no convergence")
			}
			st, err := p.Targets(ctx, arn)
			if err != nil {
				t.Fatal(err)
			}
			plan := targets.Diff(desired, st)
			if plan.Empty() && len(plan.Keep) == len(desired) && len(st) == len(desired) {
				return
			}
			if err := p.Register(ctx, arn, plan.Register); len(plan.Register) > 0 && err != nil {
				t.Fatal(err)
			}
			if err := p.Deregister(ctx, arn, plan.Deregister); len(plan.Deregister) > 0 && err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	check := func(desired []lb.Target) {
		t.Helper()
		held := f.Targets(arn)
		var got []string
		for _, h := range held {
			got = append(got, fmt.Sprintf("%s:%d", h.ID, h.Port))
		}
		var want []string
		for _, d := range desired {
			want = append(want, d.Address.String())
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("fake holds %v, want %v", got, want)
		}
	}
	converge(all[:10])
	check(all[:10])
	converge(all[5:15])
	check(all[5:15])
	if answered(p, "RegisterTargets", "Throttling") == 0 {
		t.Fatalf("calls %v: throttling did not happen", f.Calls())
	}
}

func TestRegionOf(t *testing.T) {
	r, err := RegionOf("arn:aws:elasticloadbalancing:eu-west-3:123456789012:targetgroup/web/0123456789abcdef")
	if err != nil || r != "eu-west-3" {
		t.Fatalf("RegionOf = %q, %v", r, err)
	}
	for _, bad := range []string{"", "web", "arn:aws:elasticloadbalancing::1:targetgroup/web/1", "arn:aws:ec2:eu-west-3:1:targetgroup/web/1"} {
		if _, err := RegionOf(bad); !errors.Is(err, lb.ErrInvalid) {
			t.Errorf("RegionOf(%q) = %v", bad, err)
		}
	}
}
