package proxy

import (
	"net/http"
	"strings"
	"time"
)

var bodyRedirect = []byte("sluice: this host is served over HTTPS\n")

// viaHTTPS reports whether the client's request arrived over HTTPS: on a
// TLS connection, or, from a trusted peer that terminated TLS, with
// X-Forwarded-Proto: https (its first value).
func (p *Proxy) viaHTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	xp := r.Header["X-Forwarded-Proto"]
	if len(xp) == 0 {
		return false
	}
	if _, trusted := p.peer(r.RemoteAddr); !trusted {
		return false
	}
	first, _, _ := strings.Cut(xp[0], ",")
	return strings.EqualFold(strings.TrimSpace(first), "https")
}

// redirectHTTPS answers a plain-HTTP request with a 308 (method and body
// kept) to the same host, without its port, and the same request target
// over HTTPS.
func (p *Proxy) redirectHTTPS(w http.ResponseWriter, r *http.Request, rv *routeView, start time.Time) {
	host := r.Host
	if port := portOf(host); port != "" {
		host = host[:len(host)-len(port)-1]
	}
	target := r.RequestURI
	if !strings.HasPrefix(target, "/") { // absolute-form or "*"
		target = r.URL.RequestURI()
	}
	w.Header()["Location"] = []string{"https://" + host + target}
	n := writePlain(w, http.StatusPermanentRedirect, bodyRedirect)
	p.record(r, rv, outcome{status: http.StatusPermanentRedirect, bytes: int64(n)}, start)
}
