package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"sluice.dev/sluice/internal/http1"
	"sluice.dev/sluice/internal/route"
)

// forwardAuthView asks an auth service about each request (route.ForwardAuth,
// ingress-nginx's auth-url semantics): a GET with the request's header and
// X-Original-URL, X-Original-Method, X-Forwarded-*; 2xx lets the request
// through with the listed answer headers copied into it, 401 and 403 go
// back to the client (401 as a redirect to the sign-in URL when set), and
// anything else is a 500: it fails closed.
type forwardAuthView struct {
	client *http.Client
	// url is the fixed URL (--forward-auth-any-url); else the sub-request
	// goes to one of addrs (the auth Service's endpoints), round robin,
	// with host as its Host header and path as its path and query.
	url        string
	addrs      []string
	host, path string
	rr         atomic.Uint64
	copy       []string // canonical header names
	signin     string
	timeout    time.Duration
	refuse     bool
}

// authClient is the proxy's one client for auth sub-requests, made on
// first use (under p.mu) and kept across table swaps.
func (p *Proxy) authClient() *http.Client {
	if p.pol.authClient == nil {
		d := &net.Dialer{Timeout: p.opts.DialTimeout, KeepAlive: 30 * time.Second}
		p.pol.authClient = &http.Client{
			Transport: &http.Transport{
				Proxy:               nil,
				DialContext:         d.DialContext,
				MaxIdleConnsPerHost: 64,
				IdleConnTimeout:     p.opts.IdleConnTimeout,
			},
			// The auth service's redirects go to the client, not followed.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return p.pol.authClient
}

func (p *Proxy) forwardAuthView(f *route.ForwardAuth) *forwardAuthView {
	v := &forwardAuthView{refuse: f.Refuse, url: f.URL, host: f.Host, path: f.Path, signin: f.SignIn, timeout: f.Timeout}
	if f.Refuse {
		return v
	}
	v.client = p.authClient()
	if f.Backend != nil {
		for _, e := range f.Backend.Endpoints {
			v.addrs = append(v.addrs, e.Address)
		}
	}
	for _, h := range f.ResponseHeaders {
		v.copy = append(v.copy, http.CanonicalHeaderKey(h))
	}
	return v
}

// Answers of forward authentication.
var (
	bodyAuthForbidden = []byte("sluice: forbidden by the authentication service\n")
	bodyAuthFailed    = []byte("sluice: authentication service failed\n")
)

// check asks the auth service about r. It returns 0 when r may go on,
// else the status to answer (with the headers to send set on w).
func (v *forwardAuthView) check(w http.ResponseWriter, r *http.Request, client string, https bool) (int, error) {
	if v.refuse {
		return http.StatusServiceUnavailable, nil
	}
	target := v.url
	if target == "" {
		if len(v.addrs) == 0 {
			return http.StatusServiceUnavailable, errNoAuthEndpoints
		}
		addr := v.addrs[int(v.rr.Add(1)%uint64(len(v.addrs)))]
		target = "http://" + addr + v.path
	}
	ctx, cancel := context.WithTimeout(r.Context(), v.timeout)
	defer cancel()
	sub, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return http.StatusInternalServerError, err
	}
	if v.url == "" {
		sub.Host = v.host
	}
	scheme := "http"
	if https {
		scheme = "https"
	}
	for k, vv := range r.Header {
		if http1.HopHeader(k) || k == "Content-Length" || forwardedHeader(k) || k == "X-Original-Url" || k == "X-Original-Method" {
			continue
		}
		sub.Header[k] = vv
	}
	original := scheme + "://" + r.Host + r.RequestURI
	sub.Header["X-Original-Url"] = []string{original}
	sub.Header["X-Original-Method"] = []string{r.Method}
	sub.Header["X-Auth-Request-Redirect"] = []string{r.RequestURI}
	sub.Header["X-Forwarded-Host"] = []string{r.Host}
	sub.Header["X-Forwarded-Proto"] = []string{scheme}
	sub.Header["X-Forwarded-For"] = []string{client}
	res, err := v.client.Do(sub)
	if err != nil {
		return http.StatusInternalServerError, err
	}
	defer res.Body.Close()
	_, _ = io.CopyN(io.Discard, res.Body, 64<<10) // keep the connection when short
	// A client's own value of a copied header never reaches the upstream.
	for _, k := range v.copy {
		delete(r.Header, k)
	}
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		for _, k := range v.copy {
			if vv := res.Header[k]; len(vv) > 0 {
				r.Header[k] = vv
			}
		}
		return 0, nil
	case res.StatusCode == http.StatusUnauthorized && v.signin != "":
		w.Header()["Location"] = []string{v.signin + sep(v.signin) + "rd=" + url.QueryEscape(original)}
		return http.StatusFound, nil
	case res.StatusCode == http.StatusUnauthorized:
		if c := res.Header["Www-Authenticate"]; len(c) > 0 {
			w.Header()["Www-Authenticate"] = c
		}
		return http.StatusUnauthorized, nil
	case res.StatusCode == http.StatusForbidden:
		return http.StatusForbidden, nil
	}
	return http.StatusInternalServerError, fmt.Errorf("auth service answered %d", res.StatusCode)
}

var errNoAuthEndpoints = errors.New("the auth Service has no endpoints")

func sep(u string) string {
	for i := 0; i < len(u); i++ {
		if u[i] == '?' {
			return "&"
		}
	}
	return "?"
}
