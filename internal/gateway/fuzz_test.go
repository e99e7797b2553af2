package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzBuild feeds arbitrary object sets (multi-document YAML, seeded with
// the golden inputs) to Build: it must not panic, and the tenancy
// invariants hold (checkInvariants): no rule reaches another namespace's
// Service without a ReferenceGrant, no rule comes from a route that no
// listener allows.
func FuzzBuild(f *testing.F) {
	inputs, _ := filepath.Glob("testdata/*/input.yaml")
	for _, in := range inputs {
		data, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	f.Fuzz(func(t *testing.T, data string) {
		if len(data) > 1<<16 {
			return
		}
		in, opts, err := decode([]byte(data))
		if err != nil {
			return
		}
		res := Build(in, opts)
		checkInvariants(t, in, res)
		for _, r := range res.Rules {
			if r.Host != strings.ToLower(r.Host) {
				t.Errorf("rule host %q is not lower case", r.Host)
			}
			if r.Host != "" && checkHostname(r.Host) != "" {
				t.Errorf("rule host %q is not a valid hostname", r.Host)
			}
			if checkPath(r.Path) != "" {
				t.Errorf("rule path %q is invalid", r.Path)
			}
		}
	})
}

// FuzzIntersect checks the hostname intersection: every host it yields is
// covered by both the listener's hostname and one of the route's.
func FuzzIntersect(f *testing.F) {
	f.Add("*.example.com", "a.example.com", "*.b.example.com")
	f.Add("", "", "x.org")
	f.Add("a.example.com", "*.example.com", "a.example.com")
	f.Fuzz(func(t *testing.T, lh, r1, r2 string) {
		for _, h := range []string{lh, r1, r2} {
			if h != "" && checkHostname(h) != "" {
				return
			}
		}
		routeHosts := []string{r1, r2}
		for _, h := range intersect(lh, routeHosts) {
			if !covers(lh, h) {
				t.Errorf("intersect(%q, %q) yields %q, not covered by the listener", lh, routeHosts, h)
			}
			if !covers(r1, h) && !covers(r2, h) {
				t.Errorf("intersect(%q, %q) yields %q, not covered by the route", lh, routeHosts, h)
			}
		}
	})
}

// covers reports whether pattern ("" any, "*.x" any name under x) covers
// host (a name or a wildcard).
func covers(pattern, host string) bool {
	switch {
	case pattern == "":
		return true
	case pattern == host:
		return true
	case strings.HasPrefix(pattern, "*."):
		return strings.HasSuffix(host, pattern[1:]) && len(host) > len(pattern)-1
	}
	return false
}
