package proxy

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"sluice.dev/sluice/internal/route"
)

// errorPagesView replaces upstream answers with chosen statuses by the page
// of an error Service (route.ErrorPages): a GET with X-Code, X-Format,
// X-Original-URI, X-Namespace, X-Ingress-Name, X-Service-Name,
// X-Service-Port and X-Request-ID, as ingress-nginx's custom-http-errors
// sends them. The client gets the original status with that page; if the
// error Service fails, a short plain answer with the original status.
type errorPagesView struct {
	client    *http.Client
	codes     [200]bool // status-400
	addrs     []string
	rr        atomic.Uint64
	namespace string
	ingress   string
}

// errorPageTimeout bounds the request for an error page.
const errorPageTimeout = 5 * time.Second

// maxErrorPage bounds the page copied to the client.
const maxErrorPage = 1 << 20

func (p *Proxy) errorPagesView(e *route.ErrorPages, ingress string) *errorPagesView {
	v := &errorPagesView{client: p.authClient(), namespace: e.Backend.Namespace, ingress: ingress}
	for _, c := range e.Codes {
		if c >= 400 && c < 600 {
			v.codes[c-400] = true
		}
	}
	for _, ep := range e.Backend.Endpoints {
		v.addrs = append(v.addrs, ep.Address)
	}
	return v
}

// errorPages returns rv's error pages if status is one of them, else nil.
// forward calls it for every upstream answer of a route with policies.
func (rv *routeView) errorPages(status int) *errorPagesView {
	if rv.policy == nil || rv.policy.errors == nil || status < 400 || status >= 600 || !rv.policy.errors.codes[status-400] {
		return nil
	}
	return rv.policy.errors
}

var bodyUpstreamError = []byte("sluice: the upstream answered with an error\n")

// serve answers r with status and the error Service's page for it. It
// drains (up to a bound) and closes the upstream's body first, so the
// upstream connection can be reused.
func (v *errorPagesView) serve(p *Proxy, w http.ResponseWriter, r *http.Request, rv *routeView, res *http.Response) (int, int64) {
	_, _ = io.CopyN(io.Discard, res.Body, 64<<10)
	res.Body.Close()
	status := res.StatusCode
	if len(v.addrs) == 0 {
		return status, int64(p.writeAnswer(w, r, status, bodyUpstreamError))
	}
	ctx, cancel := context.WithTimeout(r.Context(), errorPageTimeout)
	defer cancel()
	addr := v.addrs[int(v.rr.Add(1)%uint64(len(v.addrs)))]
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+r.URL.Path, nil)
	if err != nil {
		return status, int64(p.writeAnswer(w, r, status, bodyUpstreamError))
	}
	h := req.Header
	h["X-Code"] = []string{strconv.Itoa(status)}
	h["X-Format"] = r.Header["Accept"]
	h["X-Original-Uri"] = []string{r.RequestURI}
	h["X-Namespace"] = []string{v.namespace}
	h["X-Ingress-Name"] = []string{v.ingress}
	h["X-Service-Name"] = []string{rv.service}
	if id := r.Header["X-Request-Id"]; len(id) > 0 {
		h["X-Request-Id"] = id
	}
	page, err := v.client.Do(req)
	if err != nil {
		p.log.Debug("error page request failed", "ingress", rv.ingress, "error", err)
		return status, int64(p.writeAnswer(w, r, status, bodyUpstreamError))
	}
	defer page.Body.Close()
	if page.StatusCode >= 300 && page.StatusCode != status {
		// Not a page (ingress-nginx's error backends answer with the code
		// they were asked for): the short answer instead.
		_, _ = io.CopyN(io.Discard, page.Body, 64<<10)
		return status, int64(p.writeAnswer(w, r, status, bodyUpstreamError))
	}
	wh := w.Header()
	if ct := page.Header["Content-Type"]; len(ct) > 0 {
		wh["Content-Type"] = ct
	} else {
		wh["Content-Type"] = nil
	}
	wh["X-Content-Type-Options"] = valNosniff
	if page.ContentLength >= 0 && page.ContentLength <= maxErrorPage {
		wh["Content-Length"] = []string{strconv.FormatInt(page.ContentLength, 10)}
	}
	w.WriteHeader(status)
	n, _ := io.Copy(w, io.LimitReader(page.Body, maxErrorPage))
	return status, n
}
