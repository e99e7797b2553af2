package proxy

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"

	"sluice.dev/sluice/internal/http1"
	"sluice.dev/sluice/internal/route"
)

// forward sends r to an endpoint of rv's backend (which has at least one),
// retrying failures that are safe to retry on other endpoints, and copies
// the response back.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, rv *routeView, start time.Time) {
	bv := rv.backend
	now := start.UnixNano() // one clock read per request
	if p.now != nil {
		now = p.now().UnixNano()
	}

	// Read what balancing needs before the header is rewritten.
	var key uint64
	hasKey := false
	if bv.hashHeader != "" {
		if vals := r.Header[bv.hashHeader]; len(vals) > 0 {
			key, hasKey = hashString(vals[0]), true
		}
	}
	pin := bv.pinned(r.Header, now)

	ip, trusted := p.peer(r.RemoteAddr)
	upgrade, https := p.rewriteRequestHeader(r, ip, trusted)
	if rv.l7 != nil {
		rv.l7.request(r) // rewrite and request headers (l7.go)
	}

	fast := bv.protocol == route.ProtocolHTTP && p.fastPath(r, upgrade)
	again := retryable(r)
	var rb *replayBody
	var body io.ReadCloser
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		// Only the synchronous path reads the body on the handler's
		// goroutine: the Transport's may still read it after a failure.
		rb = &replayBody{rc: r.Body}
		if fast && again && r.ContentLength > 0 && r.ContentLength <= maxReplay {
			rb.keep, rb.kept = true, make([]byte, 0, r.ContentLength)
		}
		body = rb
	}

	record := func(o outcome) {
		o.body = rb
		p.record(r, rv, o, start)
	}

	var t tried
	var sent time.Time // the last attempt began; only with an access log
	for attempt := 0; ; attempt++ {
		i := pin
		if attempt > 0 || i < 0 {
			i = bv.pick(key, hasKey, now, &t)
		}
		t.add(i)
		ep := &bv.eps[i]

		capSlots := int64(p.opts.MaxConnsPerEndpoint)
		if !ep.u.slots.take(capSlots) && !p.queue(r, bv, ep, capSlots) {
			o := outcome{upstream: ep.u.addr, retries: attempt, status: statusClientClosed}
			if r.Context().Err() == nil {
				p.log.Debug("endpoint at its connection limit", "service", bv.service, "upstream", ep.u.addr, "max", capSlots)
				o.status = http.StatusServiceUnavailable
				o.bytes = int64(p.writeAnswer(w, r, o.status, bodyQueueTimeout))
			}
			record(o)
			return
		}
		sent = time.Now()
		ep.u.inflight.Add(1)
		var res *http.Response
		var hc *h1conn
		var err error
		if fast {
			res, hc, err = p.roundTrip(r, ep.pool, rb, &bv.m, start)
			if err == nil && bv.policy.ReadTimeout > 0 && res.Body != http.NoBody { // iotimeout.go
				res.Body = newIdleBody(res.Body, bv.policy.ReadTimeout, hc.close, nil)
			}
		} else {
			req := outbound(r, ep.pool.scheme, ep.u.addr, body, rb)
			ctx, cancel := attemptContext(r.Context(), bv.policy.ReadTimeout)
			if ctx != r.Context() {
				req = req.WithContext(ctx)
			}
			res, err = ep.pool.roundTripper(again && rb == nil).RoundTrip(req)
			switch {
			case err != nil:
				cancel()
			case res.StatusCode == http.StatusSwitchingProtocols:
				// A tunnel: its body is the connection; the attempt's
				// context ends with the request's.
			case bv.policy.ReadTimeout > 0 && res.Body != http.NoBody:
				res.Body = newIdleBody(res.Body, bv.policy.ReadTimeout, cancel, cancel)
			default:
				cancel()
			}
		}
		o := outcome{upstream: ep.u.addr, retries: attempt, upstreamTime: time.Since(sent)}
		if err == nil {
			bv.m.upstream.Observe(o.upstreamTime.Seconds())
		}
		if err == nil {
			ep.u.succeeded()
			setCookie := ""
			if bv.cookies != nil && i != pin {
				setCookie = ep.setCookie
				if https {
					setCookie = ep.setCookieSecure
				}
			}
			if res.StatusCode == http.StatusSwitchingProtocols {
				// A tunnel may stay open for hours: it does not hold
				// one of the endpoint's request slots.
				ep.u.slots.release(capSlots)
				capSlots = 0
			}
			var abort bool
			if ev := rv.errorPages(res.StatusCode); ev != nil { // errorpages.go
				o.status, o.bytes = ev.serve(p, w, r, rv, res)
			} else {
				o.status, o.bytes, abort = p.respond(w, r, bv, ep, res, upgrade, setCookie, rv.respHeaders())
			}
			ep.u.slots.release(capSlots)
			ep.u.inflight.Add(-1)
			if hc != nil {
				p.finish(hc, res)
			} else {
				ep.pool.release()
			}
			record(o)
			if abort {
				// The upstream failed mid-body, or the client's request
				// body broke while the response was under way: abort
				// the client's response so it is not mistaken for a
				// complete one.
				if rb.failed() {
					bv.m.clientErrors.Inc()
				} else {
					bv.m.errors[kindBody].Inc()
				}
				panic(http.ErrAbortHandler)
			}
			return
		}
		ep.u.slots.release(capSlots)
		ep.u.inflight.Add(-1)

		if r.Context().Err() != nil {
			o.status = statusClientClosed
			record(o)
			return
		}
		if clientBodyFailed(err, rb) {
			// The client's body broke its framing (or ended early): the
			// client's fault, not the endpoint's. No passive health, no
			// upstream error, no retry.
			bv.m.clientErrors.Inc()
			p.log.Debug("request body failed", "service", bv.service, "upstream", ep.u.addr, "error", err)
			w.Header()["Connection"] = valClose
			msg := bodyBadRequest
			o.status = http.StatusBadRequest
			if rb.timedOut() {
				// The client stopped sending its body (the server's body
				// idle timeout).
				o.status, msg = http.StatusRequestTimeout, bodyTooSlow
			}
			if bodyTooBig(r.Body) { // policy.go: max-body-size passed
				o.status, msg = http.StatusRequestEntityTooLarge, bodyTooLarge
			}
			o.bytes = int64(p.writeAnswer(w, r, o.status, msg))
			record(o)
			return
		}
		kind := classify(err)
		bv.m.errors[kind].Inc()
		if kind == kindConnect {
			now = p.clock().UnixNano()
			if ep.u.connectFailed(now, p.opts.FailureThreshold, p.opts.EjectDuration) {
				bv.m.ejected.Inc()
				p.log.Warn("endpoint ejected after consecutive connect failures",
					"service", bv.service, "upstream", ep.u.addr, "for", p.opts.EjectDuration, "error", err)
			}
		}
		retry := attempt < bv.retries &&
			(kind == kindConnect || kind == kindReset && again && (fast || rb == nil)) && rb.rewind()
		p.log.Debug("upstream attempt failed", "service", bv.service, "upstream", ep.u.addr,
			"kind", kindNames[kind], "retry", retry, "error", err)
		if retry {
			if kind == kindConnect {
				bv.m.retries[retryConnect].Inc()
			} else {
				bv.m.retries[retryReset].Inc()
			}
			continue
		}
		status, msg := http.StatusBadGateway, bodyBadGateway
		if http1.IsTimeout(err) || kind != kindConnect && isGRPC(r) && grpcDeadlinePassed(r, start) {
			status, msg = http.StatusGatewayTimeout, bodyTimeout
		}
		o.status = status
		o.bytes = int64(p.writeAnswer(w, r, status, msg))
		record(o)
		return
	}
}

// queue waits for a slot of ep (Options.MaxConnsPerEndpoint), counting
// the wait and its time-out.
func (p *Proxy) queue(r *http.Request, bv *backendView, ep *endpoint, limit int64) bool {
	bv.m.queued.Inc()
	if ep.u.slots.wait(r.Context(), limit, p.opts.QueueTimeout) {
		return true
	}
	if r.Context().Err() == nil {
		bv.m.queueTimeouts.Inc()
	}
	return false
}

// clientBodyFailed reports whether an attempt failed because reading the
// client's request body failed (bad chunked framing, a body shorter than
// its Content-Length), rather than because of the upstream.
func clientBodyFailed(err error, rb *replayBody) bool {
	if rb.failed() {
		return true
	}
	var be *http1.BodyReadError
	return errors.As(err, &be)
}

// outboundReq is the upstream request and its URL in one allocation.
type outboundReq struct {
	req http.Request
	url url.URL
}

// outbound returns the request to send to addr. It shares r's header (already
// rewritten), context and body; a new one is made per attempt because a
// failed attempt's transport goroutines may still hold the previous one.
func outbound(r *http.Request, scheme, addr string, body io.ReadCloser, rb *replayBody) *http.Request {
	o := &outboundReq{req: *r, url: *r.URL}
	o.url.Scheme = scheme
	o.url.Host = addr
	o.url.User = nil
	o.req.URL = &o.url
	o.req.RequestURI = ""
	// The client's "Connection: close" is about its own connection.
	o.req.Close = false
	o.req.Body = body
	if body == nil {
		// A nil body lets the transport retry on a stale keep-alive
		// connection by itself (golang.org/issue/16036).
		o.req.ContentLength = 0
	} else {
		o.req.GetBody = rb.get
	}
	return &o.req
}

// replayBody wraps a request body to know whether the transport read from
// it: until then the same body can be sent again, to another endpoint after
// a connect failure, or by the transport on a fresh connection. With keep
// (the synchronous path only, for a request that may be sent again, with a
// short body) it also keeps what was read, so the request can be sent again
// after its body went out: rewind. Close does nothing; the server closes
// the real body when the handler returns.
type replayBody struct {
	rc   io.ReadCloser
	read atomic.Bool
	// broke is set when reading rc failed other than at its end: the
	// client's body is broken.
	broke atomic.Bool
	// timeout: it failed with a timeout (the body idle timeout).
	timeout atomic.Bool

	// got counts the bytes read from rc (the client), not those read again
	// from kept.
	got atomic.Int64

	keep bool
	kept []byte // what was read from rc, while keep
	off  int    // the next byte of kept to read: kept is read before rc
}

// maxReplay is the longest body kept for sending a request again; a longer
// (or chunked) one is sent only once.
const maxReplay = 64 << 10

var errNotReplayable = errors.New("request body already sent")

func (b *replayBody) Read(p []byte) (int, error) {
	if !b.read.Load() {
		b.read.Store(true)
	}
	if b.off < len(b.kept) {
		n := copy(p, b.kept[b.off:])
		b.off += n
		return n, nil
	}
	n, err := b.rc.Read(p)
	b.got.Add(int64(n))
	if err != nil && err != io.EOF {
		if http1.IsTimeout(err) {
			b.timeout.Store(true)
		}
		b.broke.Store(true)
	}
	if b.keep && n > 0 {
		if len(b.kept)+n > maxReplay {
			b.keep, b.kept = false, nil // more than announced
		} else {
			b.kept = append(b.kept, p[:n]...)
		}
		b.off = len(b.kept)
	}
	return n, err
}

// timedOut reports whether reading the client's body failed with a
// timeout; false for a nil b.
func (b *replayBody) timedOut() bool { return b != nil && b.timeout.Load() }

// failed reports whether reading the client's body failed; false for a nil
// b (a request without a body).
func (b *replayBody) failed() bool { return b != nil && b.broke.Load() }

func (b *replayBody) Close() error { return nil }

func (b *replayBody) get() (io.ReadCloser, error) {
	if b.read.Load() {
		return nil, errNotReplayable
	}
	return b, nil
}

// keepUpTo makes b keep what is read of a body of length n (Content-Length)
// if it has not been read yet and n is at most maxReplay, and reports
// whether the body can be sent again: true for a nil b (no body).
func (b *replayBody) keepUpTo(n int64) bool {
	switch {
	case b == nil || b.keep:
		return true
	case b.read.Load() || n <= 0 || n > maxReplay:
		return false
	}
	b.keep, b.kept = true, make([]byte, 0, n)
	return true
}

// replayable reports whether the body could be sent again (true for a nil
// b, no body) as far as is known before it is sent.
func (b *replayBody) replayable() bool {
	return b == nil || b.keep || !b.read.Load()
}

// rewind makes the body read again from its start and reports whether it
// can: true for a nil b, for a body not read yet, and for a kept one.
func (b *replayBody) rewind() bool {
	switch {
	case b == nil || !b.read.Load():
		return true
	case b.keep && !b.broke.Load():
		b.off = 0
		return true
	}
	return false
}

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete, http.MethodTrace:
		return true
	}
	return false
}

// retryable reports whether r may be sent again automatically after its
// connection failed before a response (RFC 9110 section 9.2.2): an
// idempotent method, or a client's Idempotency-Key (the IETF httpapi
// draft; net/http's Transport also takes X-Idempotency-Key) saying the
// pod recognises a repeat.
func retryable(r *http.Request) bool {
	if idempotent(r.Method) {
		return true
	}
	_, ok := r.Header["Idempotency-Key"]
	if !ok {
		_, ok = r.Header["X-Idempotency-Key"]
	}
	return ok
}

func classify(err error) int {
	var ce *connectError
	if errors.As(err, &ce) {
		return kindConnect
	}
	if http1.IsTimeout(err) {
		return kindTimeout
	}
	return kindReset
}

func forwardedHeader(k string) bool {
	return k == "Forwarded" || strings.HasPrefix(k, "X-Forwarded-")
}

// rewriteRequestHeader turns the client's header into the upstream's in
// place, saving a header copy per request: net/http reads what it needs
// from the request header before calling the handler
// (golang.org/issue/14940). It returns the protocol to upgrade to ("" for
// none) and whether the client's request arrived over HTTPS (as trusted
// X-Forwarded-Proto says, or the connection).
func (p *Proxy) rewriteRequestHeader(r *http.Request, ip string, trusted bool) (upgrade string, https bool) {
	h := r.Header
	conn := h["Connection"]
	var upVals []string
	if len(conn) > 0 && httpguts.HeaderValuesContainsToken(conn, "Upgrade") {
		if up := h["Upgrade"]; len(up) > 0 && up[0] != "" && isPrint(up[0]) &&
			!strings.EqualFold(up[0], "h2c") {
			upgrade, upVals = up[0], up
		}
	}
	keepTE := httpguts.HeaderValuesContainsToken(h["Te"], "trailers")
	for k := range h {
		if http1.HopHeader(k) || (!trusted && forwardedHeader(k)) ||
			(len(conn) > 0 && httpguts.HeaderValuesContainsToken(conn, k)) {
			delete(h, k)
		}
	}
	if keepTE {
		h["Te"] = valTrailers
	}
	if upgrade != "" {
		h["Connection"] = valUpgrade
		h["Upgrade"] = upVals[:1:1]
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = valEmpty // or the transport sends Go's
	}

	// X-Forwarded-*: only a trusted peer's survive the loop above.
	https = r.TLS != nil
	if xp := h["X-Forwarded-Proto"]; len(xp) > 0 {
		first, _, _ := strings.Cut(xp[0], ",")
		https = strings.EqualFold(strings.TrimSpace(first), "https")
	} else if https {
		h["X-Forwarded-Proto"] = valHTTPS
	} else {
		h["X-Forwarded-Proto"] = valHTTP
	}
	vals := new([3]string) // one allocation for the values below
	if xff := h["X-Forwarded-For"]; len(xff) > 0 {
		vals[0] = strings.Join(xff, ", ") + ", " + ip
	} else {
		vals[0] = ip
	}
	h["X-Forwarded-For"] = vals[0:1:1]
	if _, ok := h["X-Forwarded-Host"]; !ok {
		vals[1] = r.Host
		h["X-Forwarded-Host"] = vals[1:2:2]
	}
	if _, ok := h["X-Forwarded-Port"]; !ok {
		switch port := portOf(r.Host); {
		case port != "":
			vals[2] = port
			h["X-Forwarded-Port"] = vals[2:3:3]
		case https:
			h["X-Forwarded-Port"] = valPort443
		default:
			h["X-Forwarded-Port"] = valPort80
		}
	}
	return upgrade, https
}

func isPrint(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// respond copies res to w and reports the status sent, the body bytes
// written, and whether the client's response must be aborted.
func (p *Proxy) respond(w http.ResponseWriter, r *http.Request, bv *backendView, ep *endpoint, res *http.Response, upgrade, setCookie string, l7 *l7View) (status int, n int64, abort bool) {
	if res.StatusCode == http.StatusSwitchingProtocols {
		status, n = p.tunnel(w, r, bv, res, upgrade, setCookie)
		return status, n, false
	}
	h := w.Header()
	conn := res.Header["Connection"]
	for k, vv := range res.Header {
		if http1.HopHeader(k) || (len(conn) > 0 && httpguts.HeaderValuesContainsToken(conn, k)) {
			continue
		}
		if old, ok := h[k]; ok {
			if k == "X-Request-Id" || k == "Strict-Transport-Security" || corsHeader(k) {
				continue // the proxy's own value stands
			}
			vv = append(old, vv...)
		}
		h[k] = vv // the response header is ours: share, don't copy
	}
	if setCookie != "" {
		h["Set-Cookie"] = append(h["Set-Cookie"], setCookie)
	}
	if l7 != nil {
		l7.response(h) // response header filter (l7.go)
	}
	if _, ok := h["Content-Type"]; !ok {
		// The upstream's answer passes as it is: a nil value keeps
		// net/http from sniffing a Content-Type into it.
		h["Content-Type"] = nil
	}
	announced := len(res.Trailer)
	if announced > 0 {
		keys := make([]string, 0, announced)
		for k := range res.Trailer {
			keys = append(keys, k)
		}
		h["Trailer"] = []string{strings.Join(keys, ", ")}
	}
	w.WriteHeader(res.StatusCode)

	var rc *http.ResponseController
	if streaming(res) && !trailersOnly(res) {
		rc = http.NewResponseController(w)
		_ = rc.Flush() // headers now: an event stream may be quiet for long
	}
	n, rerr, werr := p.copyBody(w, res.Body, rc)
	res.Body.Close()
	if rerr != nil && r.Context().Err() == nil {
		p.log.Debug("upstream failed while sending the response body", "service", bv.service,
			"upstream", ep.u.addr, "error", rerr)
		return res.StatusCode, n, true
	}
	if rerr != nil || werr != nil {
		return res.StatusCode, n, false // the client went away
	}
	if len(res.Trailer) > 0 {
		// Force chunking, or net/http may compute a Content-Length for a
		// short body and drop the trailers.
		_ = http.NewResponseController(w).Flush()
		if len(res.Trailer) == announced {
			for k, vv := range res.Trailer {
				h[k] = vv
			}
		} else {
			for k, vv := range res.Trailer {
				h[http.TrailerPrefix+k] = vv
			}
		}
	}
	return res.StatusCode, n, false
}

// streaming reports whether a response is flushed after every read from the
// upstream: server-sent events, and bodies of unknown length.
func streaming(res *http.Response) bool {
	if ct := res.Header["Content-Type"]; len(ct) > 0 {
		mt, _, _ := strings.Cut(ct[0], ";")
		if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
			return true
		}
	}
	return res.ContentLength == -1
}

// copyBody copies src to w with a pooled buffer, flushing after each write
// when rc is set. rerr is a failure reading src, werr one writing to w.
func (p *Proxy) copyBody(w io.Writer, src io.Reader, rc *http.ResponseController) (n int64, rerr, werr error) {
	bp := p.bufs.Get().(*[]byte)
	defer p.bufs.Put(bp)
	buf := *bp
	if hb, ok := src.(*h1body); ok && rc == nil && hb.hc.length > 0 {
		return p.copyLength(w, hb.hc, hb.hc.length, buf)
	}
	for {
		nr, err := src.Read(buf)
		if nr > 0 {
			nw, ew := w.Write(buf[:nr])
			n += int64(nw)
			if ew != nil {
				return n, nil, ew
			}
			if rc != nil {
				if ew := rc.Flush(); ew != nil {
					return n, nil, ew
				}
			}
		}
		if err == io.EOF {
			return n, nil, nil
		}
		if err != nil {
			return n, err, nil
		}
	}
}
