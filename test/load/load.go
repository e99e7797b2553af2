// Package load is sluice's open-loop HTTP load generator for integration and
// end-to-end tests. It sends requests at a fixed rate, whatever the server
// does, and counts every request that did not succeed by kind (5xx, reset,
// refused, timeout, ...), so a test can assert "failed == 0" while proxies,
// endpoints or routes change underneath.
//
// It is built so that a loss cannot hide: half of the keep-alive requests
// are POSTs whose body cannot be replayed (net/http never sends them again
// on a new connection), every request counts its connection attempts (one
// that needed a second connection is reported as retried), latency is
// measured from each request's scheduled start (a stalled scheduler or a
// slow answer shows as slow, not as success), and the result says how many
// requests were sent against how many the schedule held (SentRatio).
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
	"net/http/httptrace"
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
	KindGRPCStatus    = "grpc_status"    // an Options.Call ended with a gRPC status other than OK
	KindDroppedClient = "dropped_client" // MaxInFlight requests were already running
	KindCanceled      = "canceled"       // Run's context was canceled
	KindOther         = "other"          // anything else
)

// kindOrder is the order kinds appear in Result.String.
var kindOrder = []string{
	KindStatus5xx, KindStatus4xx, KindReset, KindRefused, KindTimeout,
	KindEOF, KindCheck, KindGRPCStatus, KindDroppedClient, KindCanceled, KindOther,
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

// Options configure Run. Rate and one of Duration, Requests or Stop are
// required.
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
	// Requests stops after this many requests; 0 for no bound. With several
	// bounds set, Run stops at whichever is reached first.
	Requests int
	// Stop, when closed, ends the schedule: no request is started after
	// that, the ones started finish. nil: only Duration or Requests end it.
	// A test closes it when the case it measures is over, so that one
	// schedule covers the whole case.
	Stop <-chan struct{}
	// KeepAliveFraction is the fraction (0..1) of requests sent on pooled
	// keep-alive connections; the others each open a new connection that is
	// closed after the response. Requests are assigned deterministically and
	// evenly spread: with 0.5 every other request is keep-alive. Every other
	// keep-alive request (the first, the third, ...) is a POST with a small
	// body that net/http cannot replay (no GetBody), so a connection closed
	// under it is a failure, never a silent retry; the others are GETs.
	// Requests on new connections are GETs.
	KeepAliveFraction float64
	// Timeout bounds each request, including reading the body; default 5s.
	Timeout time.Duration
	// MaxInFlight bounds concurrent requests; default 1000. A request whose
	// turn comes while MaxInFlight are running is not sent and counts as
	// failed with kind "dropped_client".
	MaxInFlight int
	// Check, if set, inspects each response with a status below 400 (the
	// body has not been read yet); an error counts as failed, kind "check".
	// FromEcho gives one that checks the backend's identity.
	Check func(*http.Response) error
	// SlowAfter is the latency above which a succeeded request counts as
	// slow (Result.Slow); default 1s.
	SlowAfter time.Duration
	// TLSConfig is used for https targets; nil verifies with system roots.
	TLSConfig *tls.Config
	// Call, if set, replaces the HTTP request: request i of the schedule
	// is one Call(ctx, i), bounded by Timeout, on the same open-loop
	// schedule, with the same counting and latency (for gRPC and other
	// protocols). Target may then be empty: Call dials its own
	// connections, and must keep to the ranges Run allows. A nil error is
	// a success; an error is a failure of the kind a *CallError names, or
	// as Run classifies transport errors. KeepAliveFraction, Paths, Host
	// and Check are not used, and Posts stays 0.
	Call func(ctx context.Context, i int64) error
}

// CallError is an error of Options.Call that names its kind of failure
// (e.g. KindGRPCStatus).
type CallError struct {
	Kind string
	Err  error
}

func (e *CallError) Error() string { return e.Kind + ": " + e.Err.Error() }
func (e *CallError) Unwrap() error { return e.Err }

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
	// Posts is the number of POST requests among Sent.
	Posts int64
	// Retried counts requests that needed more than one connection: net/http
	// sent them again on a new connection after a reused one closed before
	// the first response byte (only idempotent requests: GETs). They are
	// counted as succeeded or failed by their final outcome; Retried says
	// how often a closed connection would have cost a non-idempotent
	// request.
	Retried int64
	// Slow counts succeeded requests whose latency exceeded
	// Options.SlowAfter.
	Slow int64
	// SentRatio is Sent divided by what the schedule held for the time it
	// ran (Rate × Window): about 1 when the generator kept its rate; less
	// when it stopped early or fell behind and never caught up.
	SentRatio float64
	// Window is how long the schedule ran: from the first request until
	// Stop, the Duration bound or the last request's slot.
	Window time.Duration
	// ByKind counts failed requests by kind (the Kind constants); kinds that
	// did not occur are absent.
	ByKind    map[string]int64
	Latencies Latencies
	// Errors holds the first few failures, each "t=1.234s kind: detail"
	// with t the scheduled time since start; detail ends with the method
	// ("[POST]").
	Errors []string
	// Elapsed is the wall time from the first scheduled request to the end
	// of the last response.
	Elapsed time.Duration
}

// String is a one-line summary: "requests=N ok=S failed=F posts=P
// retried=R 5xx=.. reset=.. timeout=.. p50=.. p99=.. max=.. slow=S
// sent_ratio=X"; other kinds appear only when non-zero.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "requests=%d ok=%d failed=%d posts=%d retried=%d", r.Sent, r.Succeeded, r.Failed, r.Posts, r.Retried)
	for _, k := range kindOrder {
		n := r.ByKind[k]
		if n == 0 && k != KindStatus5xx && k != KindReset && k != KindTimeout {
			continue
		}
		fmt.Fprintf(&b, " %s=%d", strings.TrimPrefix(k, "status_"), n)
	}
	fmt.Fprintf(&b, " p50=%s p99=%s max=%s slow=%d sent_ratio=%.3f",
		RoundDur(r.Latencies.P50), RoundDur(r.Latencies.P99), RoundDur(r.Latencies.Max), r.Slow, r.SentRatio)
	return b.String()
}

// RoundDur rounds a latency for a summary line: ms above a second, 10µs
// above a millisecond, µs below.
func RoundDur(d time.Duration) time.Duration {
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
	if o.Call != nil && o.Target == "" {
		return nil, checkSchedule(o)
	}
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
	if err := checkSchedule(o); err != nil {
		return nil, err
	}
	for _, p := range o.Paths {
		if !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("checking options: path %q must start with /", p)
		}
	}
	return u, nil
}

// checkSchedule checks the options every kind of load needs and sets
// their defaults.
func checkSchedule(o *Options) error {
	if o.Rate <= 0 {
		return fmt.Errorf("checking options: rate must be positive, got %d", o.Rate)
	}
	if o.Duration <= 0 && o.Requests <= 0 && o.Stop == nil {
		return errors.New("checking options: set Duration, Requests or Stop")
	}
	if o.Duration < 0 || o.Requests < 0 {
		return errors.New("checking options: Duration and Requests must not be negative")
	}
	if o.KeepAliveFraction < 0 || o.KeepAliveFraction > 1 {
		return fmt.Errorf("checking options: KeepAliveFraction %v outside 0..1", o.KeepAliveFraction)
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 1000
	}
	if o.SlowAfter <= 0 {
		o.SlowAfter = time.Second
	}
	if len(o.Paths) == 0 {
		o.Paths = []string{"/"}
	}
	return nil
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
	// onDone, if set, is called when request i has finished and been
	// counted (its connection back in the pool).
	onDone func(i int64)

	succeeded, failed, posts, retried, slow atomic.Int64

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

// total returns the number of requests the schedule holds; -1 for no
// bound (only Stop or the context end it).
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

// post says whether keep-alive request i is a POST: the first, third, ...
// keep-alive request is, so at least half of them are.
func (r *runner) post(i int64) bool {
	k := int64(float64(i+1)*r.o.KeepAliveFraction) - 1 // index among keep-alive requests
	return k%2 == 0
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
	var window time.Duration
schedule:
	for i := int64(0); total < 0 || i < total; i++ {
		at := time.Duration(float64(i) * interval)
		if wait := time.Until(r.start.Add(at)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				ctxErr = ctx.Err()
				break schedule
			case <-r.o.Stop: // a nil channel never is ready
				break schedule
			case <-timer.C:
			}
		}
		// Checked after every wait too: once Stop is closed or the
		// context ended, no request starts, even if its slot came at the
		// same moment.
		if ctx.Err() != nil {
			ctxErr = ctx.Err()
			break
		}
		if stopped(r.o.Stop) {
			break
		}
		sent++
		keep := r.keepAlive(i)
		post := keep && r.post(i) && r.o.Call == nil
		if post {
			r.posts.Add(1)
		}
		select {
		case r.sem <- struct{}{}:
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-r.sem }()
				if r.o.Call != nil {
					r.call(ctx, i, at)
					return
				}
				r.one(ctx, i, at, keep, post)
			}()
		default:
			r.fail(at, KindDroppedClient, fmt.Sprintf("%d requests in flight", r.o.MaxInFlight))
		}
		if r.onScheduled != nil {
			r.onScheduled(i)
		}
	}
	// The schedule held sent requests for this long: until Stop, the
	// context's end, or the last slot (whichever ended the loop).
	window = time.Since(r.start)
	if total >= 0 && sent == total {
		window = max(window, time.Duration(float64(total)*interval))
	}
	wg.Wait()
	if ctxErr == nil {
		ctxErr = ctx.Err() // canceled while the last requests ran
	}
	return r.result(sent, window), ctxErr
}

// stopped reports whether stop is closed; false for nil.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// postBody is the body of the POST requests; small, and sent through a
// reader net/http cannot rewind.
const postBody = "sluice load: a request that must not be sent twice\n"

// one sends request i, scheduled at offset at, and records its outcome.
func (r *runner) one(ctx context.Context, i int64, at time.Duration, keep, post bool) {
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	var attempts atomic.Int32
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		// Called once for every connection a request tries: twice or
		// more when net/http retried it on a new connection.
		GetConn: func(string) { attempts.Add(1) },
	})
	defer func() {
		if attempts.Load() > 1 {
			r.retried.Add(1)
		}
		if r.onDone != nil {
			r.onDone(i)
		}
	}()
	u := *r.base
	u.Path = strings.TrimSuffix(u.Path, "/") + r.o.Paths[int(i%int64(len(r.o.Paths)))]
	if p, q, ok := strings.Cut(u.Path, "?"); ok {
		u.Path, u.RawQuery = p, q
	}
	method := http.MethodGet
	if post {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		r.fail(at, KindOther, err.Error())
		return
	}
	if post {
		// Set after NewRequest: a body given to it would get a GetBody,
		// and net/http would replay the request on a new connection.
		req.Body = io.NopCloser(strings.NewReader(postBody))
		req.ContentLength = int64(len(postBody))
		req.Header.Set("Content-Type", "text/plain")
	}
	if r.o.Host != "" {
		req.Host = r.o.Host
	}
	client := r.fresh
	if keep {
		client = r.keep
	}
	resp, err := client.Do(req)
	if err != nil {
		r.fail(at, classify(ctx, err), err.Error()+" ["+method+"]")
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
		r.fail(at, kind, detail+" ["+method+"]")
		return
	}
	r.succeed(at)
}

// call runs Options.Call for request i, scheduled at offset at, and
// records its outcome.
func (r *runner) call(ctx context.Context, i int64, at time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	defer func() {
		if r.onDone != nil {
			r.onDone(i)
		}
	}()
	if err := r.o.Call(ctx, i); err != nil {
		kind := classify(ctx, err)
		if ce := (*CallError)(nil); errors.As(err, &ce) && ce.Kind != "" {
			kind = ce.Kind
		}
		r.fail(at, kind, err.Error())
		return
	}
	r.succeed(at)
}

// succeed counts a succeeded request scheduled at offset at.
func (r *runner) succeed(at time.Duration) {
	lat := time.Since(r.start) - at
	r.succeeded.Add(1)
	if lat > r.o.SlowAfter {
		r.slow.Add(1)
	}
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

// FromEcho is a Check accepting only responses of a test/echo backend
// whose name (its X-Echo-Name header: the pod name) starts with prefix, so
// a 2xx from another backend (a default backend, another app, a stale
// route) counts as failed.
func FromEcho(prefix string) func(*http.Response) error {
	return func(resp *http.Response) error {
		if name := resp.Header.Get("X-Echo-Name"); !strings.HasPrefix(name, prefix) {
			return fmt.Errorf("answered by %q, want an echo backend %s*", name, prefix)
		}
		return nil
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

func (r *runner) result(sent int64, window time.Duration) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := Result{
		Sent:      sent,
		Succeeded: r.succeeded.Load(),
		Failed:    r.failed.Load(),
		Posts:     r.posts.Load(),
		Retried:   r.retried.Load(),
		Slow:      r.slow.Load(),
		Window:    window,
		ByKind:    make(map[string]int64, len(r.byKind)),
		Errors:    append([]string(nil), r.errors...),
		Elapsed:   time.Since(r.start),
	}
	if held := window.Seconds() * float64(r.o.Rate); held > 0 {
		res.SentRatio = float64(sent) / held
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
