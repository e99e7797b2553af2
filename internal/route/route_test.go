package route

import (
	"strings"
	"testing"
)

func be(name string) *Backend { return &Backend{Name: name, Policy: Policy{Retries: -1}} }

func prefix(path, backend string) Route {
	return Route{PathType: PathPrefix, Path: path, Backend: be(backend)}
}
func exact(path, backend string) Route {
	return Route{PathType: PathExact, Path: path, Backend: be(backend)}
}

func TestMatchPaths(t *testing.T) {
	// The cases of the Ingress v1 documentation's path matching table.
	cases := []struct {
		name   string
		routes []Route
		path   string
		want   string // backend name, "" for no match
	}{
		{"prefix root matches all", []Route{prefix("/", "a")}, "/anything", "a"},
		{"exact foo", []Route{exact("/foo", "a")}, "/foo", "a"},
		{"exact foo not bar", []Route{exact("/foo", "a")}, "/bar", ""},
		{"exact trailing slash significant", []Route{exact("/foo", "a")}, "/foo/", ""},
		{"exact trailing slash significant 2", []Route{exact("/foo/", "a")}, "/foo", ""},
		{"exact case sensitive", []Route{exact("/foo", "a")}, "/FOO", ""},
		{"prefix foo matches foo", []Route{prefix("/foo", "a")}, "/foo", "a"},
		{"prefix foo matches foo/", []Route{prefix("/foo", "a")}, "/foo/", "a"},
		{"prefix foo/ matches foo", []Route{prefix("/foo/", "a")}, "/foo", "a"},
		{"prefix foo/ matches foo/", []Route{prefix("/foo/", "a")}, "/foo/", "a"},
		{"prefix aaa/bb not aaa/bbb", []Route{prefix("/aaa/bb", "a")}, "/aaa/bbb", ""},
		{"prefix aaa/bbb matches aaa/bbb", []Route{prefix("/aaa/bbb", "a")}, "/aaa/bbb", "a"},
		{"prefix aaa/bbb/ matches aaa/bbb", []Route{prefix("/aaa/bbb/", "a")}, "/aaa/bbb", "a"},
		{"prefix aaa/bbb matches aaa/bbb/", []Route{prefix("/aaa/bbb", "a")}, "/aaa/bbb/", "a"},
		{"prefix aaa/bbb matches aaa/bbb/ccc", []Route{prefix("/aaa/bbb", "a")}, "/aaa/bbb/ccc", "a"},
		{"prefix aaa/bbb not aaa/bbbxyz", []Route{prefix("/aaa/bbb", "a")}, "/aaa/bbbxyz", ""},
		{"longest prefix wins", []Route{prefix("/", "a"), prefix("/aaa", "b")}, "/aaa/ccc", "b"},
		{"longest prefix wins 2", []Route{prefix("/", "a"), prefix("/aaa", "b"), exact("/aaa/bbb", "c")}, "/aaa/bbb/", "b"},
		{"exact beats prefix", []Route{prefix("/aaa", "a"), exact("/aaa", "b")}, "/aaa", "b"},
		{"no match falls to nothing", []Route{prefix("/aaa", "a")}, "/ccc", ""},
		{"prefix case sensitive", []Route{prefix("/aaa", "a")}, "/AAA", ""},
		{"empty path matches root prefix", []Route{prefix("/", "a")}, "", "a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tbl := New(Config{VirtualHosts: []VirtualHost{{Host: "", Routes: tc.routes}}})
			got := ""
			if r := tbl.Match("x", tc.path); r != nil {
				got = r.Backend.Name
			}
			if got != tc.want {
				t.Errorf("Match(%q) = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}

func TestMatchHosts(t *testing.T) {
	tbl := New(Config{
		VirtualHosts: []VirtualHost{
			{Host: "", Routes: []Route{prefix("/", "catchall")}},
			{Host: "*.foo.com", Routes: []Route{prefix("/", "wild")}},
			{Host: "bar.foo.com", Routes: []Route{prefix("/", "exact")}},
			{Host: "only-api.com", Routes: []Route{prefix("/api", "api")}},
		},
		DefaultBackend: be("default"),
	})
	cases := []struct{ host, path, want string }{
		{"bar.foo.com", "/", "exact"},
		{"BAR.Foo.com", "/", "exact"},
		{"bar.foo.com:8080", "/", "exact"},
		{"bar.foo.com.", "/", "exact"},
		{"baz.foo.com", "/", "wild"},
		{"baz.bar.foo.com", "/", "catchall"}, // wildcard covers one label only
		{"foo.com", "/", "catchall"},
		{"other.org", "/x", "catchall"},
		{"only-api.com", "/api/v1", "api"},
		{"only-api.com", "/web", "default"}, // no fall-through to the catch-all host
		{"", "/", "catchall"},
		{"[::1]:80", "/", "catchall"},
	}
	for _, tc := range cases {
		got := ""
		if r := tbl.Match(tc.host, tc.path); r != nil {
			got = r.Backend.Name
		}
		if got != tc.want {
			t.Errorf("Match(%q, %q) = %q, want %q", tc.host, tc.path, got, tc.want)
		}
	}
}

// An AnyDepth wildcard (a Gateway API hostname) matches names several
// labels below it; a longer suffix wins, and an Ingress wildcard beside it
// still covers one label.
func TestMatchAnyDepthWildcard(t *testing.T) {
	tbl := New(Config{VirtualHosts: []VirtualHost{
		{Host: "*.gw.io", Routes: []Route{prefix("/", "gw")}, AnyDepth: true},
		{Host: "*.deep.gw.io", Routes: []Route{prefix("/", "deeper")}, AnyDepth: true},
		{Host: "*.ing.io", Routes: []Route{prefix("/", "ing")}},
		{Host: "x.a.gw.io", Routes: []Route{prefix("/", "exact")}},
	}})
	for host, want := range map[string]string{
		"a.gw.io": "gw", "a.b.gw.io": "gw", "a.b.c.gw.io": "gw", "gw.io": "",
		"a.deep.gw.io": "deeper", "a.b.deep.gw.io": "deeper", "x.a.gw.io": "exact",
		"a.ing.io": "ing", "a.b.ing.io": "", "io": "",
	} {
		got := ""
		if r := tbl.Match(host, "/"); r != nil {
			got = r.Backend.Name
		}
		if got != want {
			t.Errorf("Match(%q) = %q, want %q", host, got, want)
		}
	}
	allocs := testing.AllocsPerRun(100, func() { tbl.Match("a.b.c.gw.io", "/x") })
	if allocs != 0 {
		t.Errorf("Match allocates %v times per call", allocs)
	}
}

func TestMatchNoDefault(t *testing.T) {
	tbl := New(Config{VirtualHosts: []VirtualHost{{Host: "a.com", Routes: []Route{prefix("/", "a")}}}})
	if r := tbl.Match("b.com", "/"); r != nil {
		t.Fatalf("Match on unknown host = %v, want nil", r)
	}
}

func TestCanonicalHost(t *testing.T) {
	for in, want := range map[string]string{
		"a.com": "a.com", "A.COM:80": "a.com", "a.com.": "a.com", "[::1]:443": "[::1]", "[::1]": "[::1]",
		"10.0.0.1:8080": "10.0.0.1", "": "",
	} {
		if got := canonicalHost(in); got != want {
			t.Errorf("canonicalHost(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	tbl := New(Config{VirtualHosts: []VirtualHost{{Host: "a.com", Routes: []Route{prefix("/api", "a"), exact("/x", "b")}}}})
	allocs := testing.AllocsPerRun(100, func() {
		if tbl.Match("a.com:8080", "/api/v1/users/") == nil {
			t.Fatal("no match")
		}
	})
	if allocs != 0 {
		t.Errorf("Match allocates %v times per call", allocs)
	}
}

func TestDumpStable(t *testing.T) {
	c := Config{VirtualHosts: []VirtualHost{{Host: "a.com", Routes: []Route{prefix("/", "ns/svc:80")}}}}
	if d := Dump(&c); !strings.Contains(d, "host a.com\n  Prefix / -> ns/svc:80") {
		t.Errorf("unexpected dump:\n%s", d)
	}
}

func FuzzMatch(f *testing.F) {
	f.Add("bar.foo.com:80", "/aaa/bbb/")
	f.Add("", "")
	f.Add("[::1", "//")
	f.Add("*.foo.com", "/%2f")
	tbl := New(Config{
		VirtualHosts: []VirtualHost{
			{Host: "", Routes: []Route{prefix("/", "catchall"), exact("/x", "x")}},
			{Host: "*.foo.com", Routes: []Route{prefix("/aaa", "wild")}},
			{Host: "bar.foo.com", Routes: []Route{prefix("/aaa/bbb", "exact")}},
		},
	})
	f.Fuzz(func(t *testing.T, host, path string) {
		r := tbl.Match(host, path)
		if r == nil {
			return
		}
		// A prefix match must be on an element boundary.
		if r.PathType == PathPrefix {
			p := strings.TrimRight(r.Path, "/")
			if !strings.HasPrefix(path, p) {
				t.Fatalf("route %q matched path %q", r.Path, path)
			}
			if rest := path[len(p):]; rest != "" && rest[0] != '/' {
				t.Fatalf("route %q matched %q off an element boundary", r.Path, path)
			}
		}
		if r.PathType == PathExact && r.Path != path {
			t.Fatalf("exact route %q matched %q", r.Path, path)
		}
		tbl.Certificate(host)
	})
}
