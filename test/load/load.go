// Package load is sluice's open-loop HTTP load generator for integration and
// end-to-end tests. It sends requests at a fixed rate, whatever the server
// does, and counts every request that did not succeed by kind (5xx, reset,
// refused, timeout, ...), so a test can assert "failed == 0" while proxies,
// endpoints or routes change underneath.
//
// Data flow: test → load.Run → HTTP client → (HAProxy →) sluice proxy →
// backends; load.Run → Result → test assertions and its one-line summary.
//
// Traffic goes only to loopback (127.0.0.0/8) or to the project's own network
// namespaces (10.244.0.0/16): Run refuses any other target, and every dial is
// checked again against the same ranges.
package load

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Kinds of failure counted in Result.ByKind.
const (
	KindStatus5xx     = "status_5xx"     // the server answered 5xx
	KindStatus4xx     = "status_4xx"     // the server answered 4xx
	KindReset         = "reset"          // connection reset by peer (RST)
	KindRefused       = "refused"        // connection refused
	KindTimeout       = "timeout"        // Options.Timeout elapsed
	KindEOF           = "eof"            // connection closed before a full response
	KindCheck         = "check"          // Options.Check rejected the response
	KindDroppedClient = "dropped_client" // MaxInFlight requests were already running
	KindCanceled      = "canceled"       // Run's context was canceled
	KindOther         = "other"          // anything else
)

// kindOrder is the order kinds appear in Result.String.
var kindOrder = []string{
	KindStatus5xx, KindStatus4xx, KindReset, KindRefused, KindTimeout,
	KindEOF, KindCheck, KindDroppedClient, KindCanceled, KindOther,
}

// maxErrorSamples bounds Result.Errors.
const maxErrorSamples = 10

// ErrForbiddenTarget is returned by Run for a target outside 127.0.0.0/8 and
// 10.244.0.0/16, and by a dial to such an address.
var ErrForbiddenTarget = errors.New("target outside 127.0.0.0/8 and 10.244.0.0/16")

var allowedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("10.244.0.0/16"),
}

// Options configure Run. Rate and one of Duration or Requests are required.
type Options struct {
	// Target is the base URL, e.g. "http://127.0.0.1:8080". Its host must be
	// an IP address in 127.0.0.0/8 or 10.244.0.0/16, or "localhost".
	Target string
	// Host is the Host header; "" sends the target's host.
	Host string
	// Paths are requested in turn; nil means "/".
	Paths []string
	// Rate is the number of requests started per second. The schedule is
	// fixed in advance (open loop): request i starts at start + i/Rate
	// whether or not earlier requests have finished; a scheduler that falls
	// behind catches up by starting the overdue requests at once.
	Rate int
	// Duration stops scheduling requests at start + Duration; 0 for no bound.
	Duration time.Duration
	// Requests stops after this many requests; 0 for no bound. With both
	// bounds set, Run stops at whichever is reached first.
	Requests int
	// KeepAliveFraction is the fraction (0..1) of requests sent on pooled
	// keep-alive connections; the others each open a new connection that is
	// closed after the response. Requests are assigned deterministically and
	// evenly spread: with 0.5 every other request is keep-alive.
	KeepAliveFraction float64
	// Timeout bounds each request, including reading the body; default 5s.
	Timeout time.Duration
	// MaxInFlight bounds concurrent requests; default 1000. A request whose
	// turn comes while MaxInFlight are running is not sent and counts as
	// failed with kind "dropped_client".
	MaxInFlight int
	// Check, if set, inspects each response with a status below 400 (the
	// body has not been read yet); an error counts as failed, kind "check".
	Check func(*http.Response) error
	// TLSConfig is used for https targets; nil verifies with system roots.
	TLSConfig *tls.Config
}

// Latencies summarise the latency of succeeded requests, measured from each
// request's scheduled start to the end of its body (so a lagging scheduler
// shows up as latency instead of being hidden).
type Latencies struct {
	P50, P99, Max time.Duration
}

// Result counts what happened. Sent == Succeeded + Failed.
type Result struct {
	// Sent is the number of requests scheduled, including dropped ones.
	Sent      int64
	Succeeded int64
	Failed    int64
	// ByKind counts failed requests by kind (the Kind constants); kinds that
	// did not occur are absent.
	ByKind    map[string]int64
	Latencies Latencies
	// Errors holds the first few failures, each "t=1.234s kind: detail"
	// with t the scheduled time since start.
	Errors []string
	// Elapsed is the wall time from the first scheduled request to the end
	// of the last response.
	Elapsed time.Duration
}

// String is a one-line summary:
// "requests=N ok=S failed=F 5xx=.. reset=.. timeout=.. p50=.. p99=.. max=..";
// other kinds appear only when non-zero.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "requests=%d ok=%d failed=%d", r.Sent, r.Succeeded, r.Failed)
	for _, k := range kindOrder {
		n := r.ByKind[k]
		if n == 0 && k != KindStatus5xx && k != KindReset && k != KindTimeout {
			continue
		}
		fmt.Fprintf(&b, " %s=%d", strings.TrimPrefix(k, "status_"), n)
	}
	fmt.Fprintf(&b, " p50=%s p99=%s max=%s",
		roundDur(r.Latencies.P50), roundDur(r.Latencies.P99), roundDur(r.Latencies.Max))
	return b.String()
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(time.Microsecond)
	}
}

// Run sends requests as o describes and returns what happened. It returns
// when every request has finished. The error is non-nil for invalid options
// (nothing is sent) or when ctx was canceled (the Result then counts what
// was sent until then, unfinished requests as "canceled").
func Run(ctx context.Context, o Options) (Result, error) {
	base, err := checkOptions(&o)
	if err != nil {
		return Result{}, err
	}
	r := newRunner(o, base)
	defer r.close()
	return r.run(ctx)
}

func checkOptions(o *Options) (*url.URL, error) {
	u, err := url.Parse(o.Target)
	if err != nil {
		return nil, fmt.Errorf("parsing target %q: %w", o.Target, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("checking target %q: scheme must be http or https", o.Target)
	}
	if err := checkHost(u.Hostname()); err != nil {
		return nil, fmt.Errorf("checking target %q: %w", o.Target, err)
	}
	if o.Rate <= 0 {
		return nil, fmt.Errorf("checking options: rate must be positive, got %d", o.Rate)
	}
	if o.Duration <= 0 && o.Requests <= 0 {
		return nil, errors.New("checking options: set Duration or Requests")
	}
	if o.Duration < 0 || o.Requests < 0 {
		return nil, errors.New("checking options: Duration and Requests must not be negative")
	}
	if o.KeepAliveFraction < 0 || o.KeepAliveFraction > 1 {
		return nil, fmt.Errorf("checking options: KeepAliveFraction %v outside 0..1", o.KeepAliveFraction)
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 1000
	}
	if len(o.Paths) == 0 {
		o.Paths = []string{"/"}
	}
	for _, p := range o.Paths {
		if !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("checking options: path %q must start with /", p)
		}
	}
	return u, nil
}

// checkHost accepts "localhost" and IP addresses in the allowed ranges.
// Other names are refused rather than resolved: a resolver could point
// anywhere.
func checkHost(h string) error {
	if strings.EqualFold(h, "localhost") {
		return nil
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		return fmt.Errorf("host %q is not an IP address: %w", h, ErrForbiddenTarget)
	}
	if !allowedAddr(ip) {
		return fmt.Errorf("address %s: %w", ip, ErrForbiddenTarget)
	}
	return nil
}

func allowedAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range allowedPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// checkDial refuses connections outside the allowed ranges, whatever the
// target name resolved to.
func checkDial(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dialing %s: %w", address, err)
	}
	if !allowedAddr(ap.Addr()) {
		return fmt.Errorf("dialing %s: %w", address, ErrForbiddenTarget)
	}
	return nil
}

type runner struct {
	o     Options
	base  *url.URL
	keep  *http.Client // pooled keep-alive connections
	fresh *http.Client // a new connection per request
	sem   chan struct{}
	start time.Time
	// onScheduled, if set, is called after request i was started or
	// dropped; tests use it to synchronise with the schedule.
	onScheduled func(i int64)

	succeeded, failed atomic.Int64

	mu        sync.Mutex
	byKind    map[string]int64
	errors    []string
	latencies []time.Duration
}

func newRunner(o Options, base *url.URL) *runner {
	dialer := &net.Dialer{Timeout: o.Timeout, KeepAlive: 30 * time.Second, Control: checkDial}
	transport := func(keepAlive bool) *http.Transport {
		return &http.Transport{
			Proxy:               nil, // never an HTTP_PROXY from the environment
			DialContext:         dialer.DialContext,
			TLSClientConfig:     o.TLSConfig,
			DisableKeepAlives:   !keepAlive,
			MaxIdleConns:        o.MaxInFlight,
			MaxIdleConnsPerHost: o.MaxInFlight,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: o.Timeout,
		}
	}
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &runner{
		o:      o,
		base:   base,
		keep:   &http.Client{Transport: transport(true), CheckRedirect: noRedirect},
		fresh:  &http.Client{Transport: transport(false), CheckRedirect: noRedirect},
		sem:    make(chan struct{}, o.MaxInFlight),
		byKind: map[string]int64{},
	}
}

func (r *runner) close() {
	r.keep.CloseIdleConnections()
	r.fresh.CloseIdleConnections()
}

// total returns the number of requests the schedule holds.
func (r *runner) total() int64 {
	n := int64(-1)
	if r.o.Requests > 0 {
		n = int64(r.o.Requests)
	}
	if r.o.Duration > 0 {
		// Request i is scheduled at i/Rate; those before Duration are sent.
		d := (int64(r.o.Duration)*int64(r.o.Rate) + int64(time.Second) - 1) / int64(time.Second)
		if n < 0 || d < n {
			n = d
		}
	}
	return n
}

// keepAlive says whether request i goes on a pooled connection: an even
// spread with exactly floor(n*fraction) keep-alive requests among the first n.
func (r *runner) keepAlive(i int64) bool {
	f := r.o.KeepAliveFraction
	return int64(float64(i+1)*f) > int64(float64(i)*f)
}

func (r *runner) run(ctx context.Context) (Result, error) {
	total := r.total()
	interval := float64(time.Second) / float64(r.o.Rate)
	var wg sync.WaitGroup
	r.start = time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	var sent int64
	var ctxErr error
schedule:
	for i := int64(0); i < total; i++ {
		at := time.Duration(float64(i) * interval)
		if wait := time.Until(r.start.Add(at)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				ctxErr = ctx.Err()
				break schedule
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			ctxErr = ctx.Err()
			break
		}
		sent++
		select {
		case r.sem <- struct{}{}:
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-r.sem }()
				r.one(ctx, i, at)
			}()
		default:
			r.fail(at, KindDroppedClient, fmt.Sprintf("%d requests in flight", r.o.MaxInFlight))
		}
		if r.onScheduled != nil {
			r.onScheduled(i)
		}
	}
	wg.Wait()
	if ctxErr == nil {
		ctxErr = ctx.Err() // canceled while the last requests ran
	}
	return r.result(sent), ctxErr
}

// one sends request i, scheduled at offset at, and records its outcome.
func (r *runner) one(ctx context.Context, i int64, at time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	u := *r.base
	u.Path = strings.TrimSuffix(u.Path, "/") + r.o.Paths[int(i%int64(len(r.o.Paths)))]
	if p, q, ok := strings.Cut(u.Path, "?"); ok {
		u.Path, u.RawQuery = p, q
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		r.fail(at, KindOther, err.Error())
		return
	}
	if r.o.Host != "" {
		req.Host = r.o.Host
	}
	client := r.fresh
	if r.keepAlive(i) {
		client = r.keep
	}
	resp, err := client.Do(req)
	if err != nil {
		r.fail(at, classify(ctx, err), err.Error())
		return
	}
	defer resp.Body.Close()
	var kind, detail string
	switch {
	case resp.StatusCode >= 500:
		kind, detail = KindStatus5xx, resp.Status
	case resp.StatusCode >= 400:
		kind, detail = KindStatus4xx, resp.Status
	case r.o.Check != nil:
		if err := r.o.Check(resp); err != nil {
			kind, detail = KindCheck, err.Error()
		}
	}
	// Read the whole body: a response cut short is a failure too, and a
	// keep-alive connection is reused only after its body is drained.
	if _, err := io.Copy(io.Discard, resp.Body); err != nil && kind == "" {
		kind, detail = classify(ctx, err), "reading body: "+err.Error()
	}
	if kind != "" {
		r.fail(at, kind, detail)
		return
	}
	lat := time.Since(r.start) - at
	r.succeeded.Add(1)
	r.mu.Lock()
	r.latencies = append(r.latencies, lat)
	r.mu.Unlock()
}

func (r *runner) fail(at time.Duration, kind, detail string) {
	r.failed.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byKind[kind]++
	if len(r.errors) < maxErrorSamples {
		r.errors = append(r.errors, fmt.Sprintf("t=%.3fs %s: %s", at.Seconds(), kind, detail))
	}
}

// classify names the kind of a transport or body-read error. ctx is the
// request's context: its deadline means timeout, its cancellation by Run's
// caller means canceled.
func classify(ctx context.Context, err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return KindTimeout
	case errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled):
		return KindCanceled
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return KindReset
	case errors.Is(err, syscall.ECONNREFUSED):
		return KindRefused
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return KindEOF
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return KindTimeout
	}
	// net/http reports a server that closed a fresh connection without a
	// response with these texts and no wrapped io.EOF.
	msg := err.Error()
	if strings.Contains(msg, "server closed") || strings.HasSuffix(msg, ": EOF") {
		return KindEOF
	}
	return KindOther
}

func (r *runner) result(sent int64) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := Result{
		Sent:      sent,
		Succeeded: r.succeeded.Load(),
		Failed:    r.failed.Load(),
		ByKind:    make(map[string]int64, len(r.byKind)),
		Errors:    append([]string(nil), r.errors...),
		Elapsed:   time.Since(r.start),
	}
	for k, v := range r.byKind {
		res.ByKind[k] = v
	}
	if n := len(r.latencies); n > 0 {
		l := append([]time.Duration(nil), r.latencies...)
		sort.Slice(l, func(a, b int) bool { return l[a] < l[b] })
		res.Latencies = Latencies{P50: l[quantileIndex(n, 0.50)], P99: l[quantileIndex(n, 0.99)], Max: l[n-1]}
	}
	return res
}

// quantileIndex is the nearest-rank index of quantile q in n sorted values.
func quantileIndex(n int, q float64) int {
	i := int(float64(n)*q+0.999999999) - 1
	return max(0, min(n-1, i))
}
