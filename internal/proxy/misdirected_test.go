package proxy

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"sluice.dev/sluice/internal/route"
)

// tenantTable: shop.example.com belongs to namespace a, b.example.com to b;
// each routes to its own backend. def is the default backend (nil: none).
func tenantTable(a, b, def *route.Backend) *route.Table {
	vh := func(host string, be *route.Backend) route.VirtualHost {
		return route.VirtualHost{Host: host, Routes: []route.Route{{PathType: route.PathPrefix, Path: "/", Backend: be, Ingress: be.Namespace + "/ing"}}}
	}
	return route.New(route.Config{
		VirtualHosts:   []route.VirtualHost{vh("b.example.com", b), vh("shop.example.com", a)},
		DefaultBackend: def,
		Owners:         []route.HostOwner{{Host: "b.example.com", Namespace: "b"}, {Host: "shop.example.com", Namespace: "a"}},
	})
}

// TestMisdirected421: over TLS, a request for another tenant's host than
// the connection's server name gets 421 and never reaches that tenant;
// the same host, and connections without SNI, are served.
func TestMisdirected421(t *testing.T) {
	a := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("a")) })
	var hitsB atomic.Int32
	b := newBackend(t, "b", func(w http.ResponseWriter, r *http.Request) { hitsB.Add(1); w.Write([]byte("b")) })
	beA, beB := backendOf("a/a", defaults(), a.addr()), backendOf("b/b", defaults(), b.addr())
	beA.Namespace, beB.Namespace = "a", "b"
	p := New(Options{StdTransport: stdMode})
	p.Update(tenantTable(beA, beB, nil))
	srv := httptest.NewUnstartedServer(p)
	srv.StartTLS()
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		sni, host string
		status    int
		body      string
	}{
		{"shop.example.com", "shop.example.com", 200, "a"},
		{"shop.example.com", "b.example.com", 421, ""},
		{"b.example.com", "shop.example.com:443", 421, ""},
		{"b.example.com", "B.example.com", 200, "b"},
		{"", "b.example.com", 200, "b"}, // no SNI: by Host, as on plain HTTP
	} {
		tr := srv.Client().Transport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true, ServerName: tc.sni}
		if tc.sni == "" {
			// An IP address as server name sends no SNI.
			tr.TLSClientConfig.ServerName = "127.0.0.1"
		}
		c := &http.Client{Transport: tr}
		t.Cleanup(tr.CloseIdleConnections)
		req, _ := http.NewRequest("GET", srv.URL+"/", nil)
		req.Host = tc.host
		r := do(t, c, req)
		if r.status != tc.status || (tc.body != "" && r.body != tc.body) {
			t.Errorf("SNI %q Host %q: got %d %q, want %d %q", tc.sni, tc.host, r.status, r.body, tc.status, tc.body)
		}
	}
	if n := hitsB.Load(); n != 2 {
		t.Errorf("backend b got %d requests, want the 2 served ones (421 must not reach it)", n)
	}
}

// TestUnknownHost404: without a platform default backend an unknown host
// gets the proxy's plain 404; with one, the default backend answers.
func TestUnknownHost404(t *testing.T) {
	a := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("a")) })
	d := newBackend(t, "d", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("platform")) })
	beA := backendOf("a/a", defaults(), a.addr())
	beA.Namespace = "a"
	p, srv, c := front(t, Options{})
	p.Update(tenantTable(beA, beA, nil))
	host := func(h string) result {
		req, _ := http.NewRequest("GET", srv.URL+"/", nil)
		req.Host = h
		return do(t, c, req)
	}
	if r := host("unknown.example.org"); r.status != 404 || r.body != string(bodyNoRoute) {
		t.Errorf("unknown host without default: %d %q, want 404 %q", r.status, r.body, bodyNoRoute)
	}
	p.Update(tenantTable(beA, beA, backendOf("system/default", defaults(), d.addr())))
	if r := host("unknown.example.org"); r.status != 200 || r.body != "platform" {
		t.Errorf("unknown host with the platform default: %d %q", r.status, r.body)
	}
	if r := host("shop.example.com"); r.status != 200 || r.body != "a" {
		t.Errorf("known host: %d %q", r.status, r.body)
	}
}
