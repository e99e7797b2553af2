package proxy

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"sluice.dev/sluice/internal/route"
)

// TestConditions: method, header and query matches choose among the
// routes of one path in order, and a request none accepts falls through to
// a shorter path (route.Conditions); without a fall-back it is 404.
func TestConditions(t *testing.T) {
	v1, v2, post := echoBackend(t, "v1"), echoBackend(t, "v2"), echoBackend(t, "post")
	b1, b2, bp := backendOf("default/v1", defaults(), v1.addr()), backendOf("default/v2", defaults(), v2.addr()), backendOf("default/post", defaults(), post.addr())
	p, srv, c := front(t, Options{})
	p.Update(l7Table(
		route.Route{PathType: route.PathPrefix, Path: "/", Backend: b2, Ingress: "HTTPRoute:default/r",
			Conditions: &route.Conditions{Headers: []route.ValueMatch{{Name: "Version", Value: "two"}}}},
		route.Route{PathType: route.PathPrefix, Path: "/", Backend: b2, Ingress: "HTTPRoute:default/r",
			Conditions: &route.Conditions{Query: []route.ValueMatch{{Name: "v", Value: "2|two", Regex: true}}}},
		route.Route{PathType: route.PathPrefix, Path: "/", Backend: b1, Ingress: "HTTPRoute:default/r"},
		route.Route{PathType: route.PathPrefix, Path: "/api", Backend: bp, Ingress: "HTTPRoute:default/r",
			Conditions: &route.Conditions{Method: http.MethodPost}},
		route.Route{PathType: route.PathExact, Path: "/only-delete", Backend: bp, Ingress: "HTTPRoute:default/r",
			Conditions: &route.Conditions{Method: http.MethodDelete}},
	))
	for _, tc := range []struct {
		method, path string
		hdr          []string
		want         string // X-Backend; "" for the root route's v1 fall-back
	}{
		{"GET", "/x", nil, "v1"},
		{"GET", "/x", []string{"version", "two"}, "v2"},
		{"GET", "/x", []string{"Version", "three"}, "v1"},
		{"GET", "/x?v=two", nil, "v2"},
		{"GET", "/x?v=twoo", nil, "v1"},
		{"POST", "/api/items", nil, "post"},
		{"GET", "/api/items", nil, "v1"},
		{"GET", "/api/items", []string{"Version", "two"}, "v2"},
		{"DELETE", "/only-delete", nil, "post"},
		{"GET", "/only-delete", nil, "v1"}, // Exact's conditions fail: the prefix "/"
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		req.Host = "app.example.com"
		for i := 0; i+1 < len(tc.hdr); i += 2 {
			req.Header.Add(tc.hdr[i], tc.hdr[i+1])
		}
		res := do(t, c, req)
		if res.status != 200 || res.header.Get("X-Backend") != tc.want {
			t.Errorf("%s %s %v: %d from %q, want %q", tc.method, tc.path, tc.hdr, res.status, res.header.Get("X-Backend"), tc.want)
		}
	}

	// Only conditional routes: a request none accepts is 404.
	p.Update(l7Table(route.Route{PathType: route.PathPrefix, Path: "/", Backend: b2, Ingress: "HTTPRoute:default/r",
		Conditions: &route.Conditions{Method: http.MethodPost}}))
	if res := hostGet(t, c, srv.URL+"/"); res.status != http.StatusNotFound {
		t.Errorf("GET with only a POST route: %d, want 404", res.status)
	}
}

// TestInvalidShare: a backend whose reference cannot be resolved answers
// 500 (not 503) for its share of a weighted split, and alone.
func TestInvalidShare(t *testing.T) {
	good := echoBackend(t, "good")
	bg := backendOf("default/good", defaults(), good.addr())
	bad := &route.Backend{Name: "default/HTTPRoute:r:unresolved", Namespace: "default", Service: "HTTPRoute:r", Port: "unresolved", Policy: defaults(), Invalid: true}
	p, srv, c := front(t, Options{})
	p.Update(l7Table(
		route.Route{PathType: route.PathPrefix, Path: "/split", Backend: bg, Ingress: "HTTPRoute:default/r",
			Split: &route.Split{Weighted: []route.WeightedBackend{{Backend: bg, Weight: 1}, {Backend: bad, Weight: 1}}}},
		route.Route{PathType: route.PathPrefix, Path: "/bad", Backend: bad, Ingress: "HTTPRoute:default/r"},
	))
	if res := hostGet(t, c, srv.URL+"/bad"); res.status != http.StatusInternalServerError {
		t.Errorf("invalid backend: %d, want 500", res.status)
	}
	counts := map[int]int{}
	const n = 400
	for range n {
		counts[hostGet(t, c, srv.URL+"/split").status]++
	}
	if counts[200]+counts[500] != n || counts[200] < n/4 || counts[500] < n/4 {
		t.Errorf("split 1:1 with an invalid share: %v, want about half 200 and half 500", counts)
	}
}

// TestMirror: a copy of each bodiless request reaches the mirror, whose
// failures and answers never change the client's; requests with a body
// are not mirrored.
func TestMirror(t *testing.T) {
	main := echoBackend(t, "main")
	var posts atomic.Int64
	shadow := newBackend(t, "shadow", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		}
		w.WriteHeader(http.StatusInternalServerError)
	})
	bm := backendOf("default/main", defaults(), main.addr())
	bs := backendOf("default/shadow", defaults(), shadow.addr())
	dead := backendOf("default/dead", defaults(), deadAddr(t))
	p, srv, c := front(t, Options{})
	p.Update(l7Table(route.Route{PathType: route.PathPrefix, Path: "/", Backend: bm, Ingress: "HTTPRoute:default/r",
		Mirrors: []*route.Backend{bs, dead}}))
	for i := range 5 {
		res := hostGet(t, c, srv.URL+"/m?i=1", "X-Trace", "abc")
		if res.status != 200 || res.body != "/m?i=1" {
			t.Fatalf("request %d: %d %q, want the main backend's 200", i, res.status, res.body)
		}
	}
	eventually(t, "5 mirrored requests", func() bool { return shadow.hits.Load() == 5 })
	r, _ := shadow.lastRequest()
	if r.URL.RequestURI() != "/m?i=1" || r.Host != "app.example.com" || r.Header.Get("X-Trace") != "abc" {
		t.Errorf("mirrored request %s host %s header %v: want the client's", r.URL.RequestURI(), r.Host, r.Header)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/m", strings.NewReader("body"))
	req.Host = "app.example.com"
	if res := do(t, c, req); res.status != 200 {
		t.Fatalf("POST: %d", res.status)
	}
	// A GET after it: once its copy arrived, a copy of the POST (sent
	// first) would have too.
	hostGet(t, c, srv.URL+"/after")
	eventually(t, "the mirrored GET after the POST", func() bool { r, _ := shadow.lastRequest(); return r.URL.Path == "/after" })
	if main.hits.Load() != 7 || posts.Load() != 0 {
		t.Errorf("after a POST with a body: main %d hits, %d POSTs mirrored; want 7 and 0", main.hits.Load(), posts.Load())
	}
}
