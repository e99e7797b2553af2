package proxy

import (
	"io"
	"net/http"
	"strings"

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
	done := make(chan result, 2)
	go func() {
		n, _ := p.copyConn(backConn, fromClient)
		done <- result{n: n}
	}()
	go func() {
		n, _ := p.copyConn(conn, backConn)
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
