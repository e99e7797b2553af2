package proxy

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// tunnel completes a protocol switch (WebSocket and other Upgrade
// requests): it checks the upstream switched to the protocol the client
// asked for, hijacks the client connection, relays the 101 response and
// copies bytes both ways until either side closes. It returns the status
// sent and the bytes copied from the upstream to the client.
func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request, bv *backendView, res *http.Response, upgrade, setCookie string) (int, int64) {
	resUp := ""
	if httpguts.HeaderValuesContainsToken(res.Header["Connection"], "Upgrade") {
		if v := res.Header["Upgrade"]; len(v) > 0 {
			resUp = v[0]
		}
	}
	backConn, ok := res.Body.(io.ReadWriteCloser)
	if upgrade == "" || !isPrint(resUp) || !strings.EqualFold(upgrade, resUp) || !ok {
		res.Body.Close()
		p.log.Debug("upstream switched protocols unasked", "service", bv.service,
			"requested", upgrade, "got", resUp)
		return http.StatusBadGateway, int64(writePlain(w, http.StatusBadGateway, bodyBadGateway))
	}
	defer backConn.Close()

	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		p.log.Debug("hijacking client connection for upgrade", "error", err)
		return http.StatusBadGateway, int64(writePlain(w, http.StatusBadGateway, bodyBadGateway))
	}
	defer conn.Close()

	if setCookie != "" {
		res.Header["Set-Cookie"] = append(res.Header["Set-Cookie"], setCookie)
	}
	res.Body = nil // write only the status line and header
	if err := res.Write(brw); err != nil {
		return http.StatusSwitchingProtocols, 0
	}
	if err := brw.Flush(); err != nil {
		return http.StatusSwitchingProtocols, 0
	}

	// Bytes the client sent after its request, already buffered by the
	// server, go first.
	var fromClient io.Reader = conn
	if nb := brw.Reader.Buffered(); nb > 0 {
		fromClient = io.MultiReader(io.LimitReader(brw.Reader, int64(nb)), conn)
	}
	type result struct {
		n    int64
		down bool
	}
	idle := p.watchIdle(conn, backConn)
	defer idle.stop()
	done := make(chan result, 2)
	go func() {
		n, _ := p.copyConn(backConn, idle.reader(fromClient))
		done <- result{n: n}
	}()
	go func() {
		n, _ := p.copyConn(conn, idle.reader(backConn))
		done <- result{n: n, down: true}
	}()
	var down int64
	// The first direction to end ends the tunnel, as do the request's
	// context (server shutdown of the handler's context).
	var first result
	select {
	case first = <-done:
	case <-r.Context().Done():
		first = result{n: -1}
	}
	conn.Close()
	backConn.Close()
	pending := 2
	if first.n >= 0 {
		pending = 1
		if first.down {
			down = first.n
		}
	}
	for range pending {
		if res := <-done; res.down {
			down = res.n
		}
	}
	return http.StatusSwitchingProtocols, down
}

// copyConn copies with a pooled buffer and half-closes dst at src's EOF.
func (p *Proxy) copyConn(dst io.Writer, src io.Reader) (int64, error) {
	bp := p.bufs.Get().(*[]byte)
	defer p.bufs.Put(bp)
	n, err := io.CopyBuffer(dst, src, *bp)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
		_ = cw.CloseWrite()
	}
	return n, err
}

// tunnelIdle closes a tunnel once no byte went either way for
// Options.TunnelIdleTimeout. The copies note the time of each read
// (reader); one timer per tunnel checks it when it fires and is set
// again for the rest of the timeout, so a busy tunnel costs a clock read
// per read, not a timer.
type tunnelIdle struct {
	p       *Proxy
	timeout time.Duration
	start   time.Time
	last    atomic.Int64 // time of the last read, in nanoseconds since start
	timer   *time.Timer
	stopped atomic.Bool
	closers [2]io.Closer
}

// watchIdle starts the idle watch of the tunnel between a and b; nil
// (which does nothing) when the timeout is off.
func (p *Proxy) watchIdle(a, b io.Closer) *tunnelIdle {
	if p.opts.TunnelIdleTimeout <= 0 {
		return nil
	}
	t := &tunnelIdle{p: p, timeout: p.opts.TunnelIdleTimeout, start: time.Now(), closers: [2]io.Closer{a, b}}
	t.timer = time.AfterFunc(t.timeout, t.check)
	return t
}

func (t *tunnelIdle) check() {
	if t.stopped.Load() {
		return // the tunnel ended: a Reset now would outlive it
	}
	idle := time.Since(t.start) - time.Duration(t.last.Load())
	if idle < t.timeout {
		t.timer.Reset(t.timeout - idle)
		return
	}
	t.p.m.tunnelIdle.Inc()
	t.p.log.Debug("closing idle tunnel", "idle", idle)
	for _, c := range t.closers {
		c.Close()
	}
}

func (t *tunnelIdle) stop() {
	if t != nil {
		t.stopped.Store(true)
		t.timer.Stop()
	}
}

// reader returns r noting the time of every read that brought bytes.
func (t *tunnelIdle) reader(r io.Reader) io.Reader {
	if t == nil {
		return r
	}
	return &idleReader{r: r, t: t}
}

type idleReader struct {
	r io.Reader
	t *tunnelIdle
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.t.last.Store(int64(time.Since(r.t.start)))
	}
	return n, err
}
