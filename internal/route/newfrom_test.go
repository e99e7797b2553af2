package route

import (
	"fmt"
	"testing"
)

// TestNewFromReusesUnchangedHosts: NewFrom reuses the compiled hosts whose
// routes are the very same slice, compiles the others, and matches as New.
func TestNewFromReusesUnchangedHosts(t *testing.T) {
	be := &Backend{Name: "ns/web:80"}
	var c1 Config
	for i := range 4 {
		c1.VirtualHosts = append(c1.VirtualHosts, VirtualHost{Host: fmt.Sprintf("h%d.example", i), Routes: []Route{
			{PathType: PathPrefix, Path: "/", Backend: be, Ingress: fmt.Sprintf("ns/ing-%d", i)},
			{PathType: PathExact, Path: "/x", Backend: be, Ingress: fmt.Sprintf("ns/ing-%d", i)},
		}})
	}
	c1.VirtualHosts = append(c1.VirtualHosts, VirtualHost{Host: "*.wild.example", Routes: []Route{{PathType: PathPrefix, Path: "/", Backend: be, Ingress: "ns/wild"}}})
	t1 := New(c1)

	c2 := c1
	c2.VirtualHosts = append([]VirtualHost(nil), c1.VirtualHosts...)
	c2.VirtualHosts[1].Routes = []Route{{PathType: PathPrefix, Path: "/api", Backend: be, Ingress: "ns/changed"}}
	c2.VirtualHosts[2].Routes = c1.VirtualHosts[2].Routes[:1] // same array, shorter: compiled again
	t2 := NewFrom(t1, c2)

	for _, h := range []string{"h0.example", "h3.example"} {
		if t2.exact[h] != t1.exact[h] {
			t.Errorf("%s: compiled again; want the vhost of the previous table", h)
		}
	}
	if t2.wildcards["wild.example"] != t1.wildcards["wild.example"] {
		t.Errorf("*.wild.example: compiled again; want the vhost of the previous table")
	}
	for _, h := range []string{"h1.example", "h2.example"} {
		if t2.exact[h] == t1.exact[h] {
			t.Errorf("%s: reused; its routes changed", h)
		}
	}
	want := New(c2)
	for _, h := range []string{"h0.example", "h1.example", "h2.example", "h3.example", "a.wild.example", "other.example"} {
		for _, p := range []string{"/", "/x", "/api/v1", "/y"} {
			got, exp := t2.Match(h, p), want.Match(h, p)
			if (got == nil) != (exp == nil) || got != nil && (got.Ingress != exp.Ingress || got.Path != exp.Path) {
				t.Errorf("Match(%s, %s) = %+v; New gives %+v", h, p, got, exp)
			}
		}
	}
}
