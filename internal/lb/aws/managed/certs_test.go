package managed

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		name, host string
		want       bool
	}{
		{"a.example.com", "a.example.com", true},
		{"A.Example.com", "a.example.COM", true},
		{"a.example.com.", "a.example.com", true},
		{"*.example.com", "a.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "a.b.example.com", false},
		{"*.example.com", ".example.com", false},
		{"*.example.com", "*.example.com", true},
		{"*.example.com", "*.b.example.com", false},
		{"a.example.com", "*.example.com", false},
		{"*.*.example.com", "a.b.example.com", false},
		{"*.", "a.", false},
		{"", "", false},
		{"example.com", "a.example.com", false},
	} {
		if got := Covers(tc.name, tc.host); got != tc.want {
			t.Errorf("Covers(%q, %q) = %v, want %v", tc.name, tc.host, got, tc.want)
		}
	}
}

func TestSelect(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	year := now.Add(365 * 24 * time.Hour)
	c := func(arn string, notAfter time.Time, names ...string) Cert {
		return Cert{ARN: arn, Names: names, Status: "ISSUED", NotBefore: now.Add(-time.Hour), NotAfter: notAfter}
	}
	for _, tc := range []struct {
		name      string
		hosts     []string
		certs     []Cert
		want      []string
		uncovered []string
	}{
		{"exact beats wildcard", []string{"a.example.com"},
			[]Cert{c("w", year, "*.example.com"), c("e", year, "a.example.com")}, []string{"e"}, nil},
		{"one wildcard for two hosts is the default", []string{"a.example.com", "b.example.com", "x.other.org"},
			[]Cert{c("w", year, "*.example.com"), c("o", year, "x.other.org")}, []string{"w", "o"}, nil},
		{"expiring within 7 days gives way to its renewal", []string{"a.example.com"},
			[]Cert{c("old", now.Add(6*24*time.Hour), "a.example.com"), c("new", year, "a.example.com")}, []string{"new"}, nil},
		{"expiring with no renewal: uncovered", []string{"a.example.com"},
			[]Cert{c("old", now.Add(6*24*time.Hour), "a.example.com")}, nil, []string{"a.example.com"}},
		{"later expiry wins", []string{"a.example.com"},
			[]Cert{c("b", year, "a.example.com"), c("a", year.Add(time.Hour), "a.example.com")}, []string{"a"}, nil},
		{"same expiry: smallest ARN", []string{"a.example.com"},
			[]Cert{c("b", year, "a.example.com"), c("a", year, "a.example.com")}, []string{"a"}, nil},
		{"not issued is skipped", []string{"a.example.com"},
			[]Cert{{ARN: "p", Names: []string{"a.example.com"}, Status: "PENDING_VALIDATION", NotAfter: year}}, nil, []string{"a.example.com"}},
		{"not yet valid is skipped", []string{"a.example.com"},
			[]Cert{{ARN: "f", Names: []string{"a.example.com"}, Status: "ISSUED", NotBefore: now.Add(time.Hour), NotAfter: year}}, nil, []string{"a.example.com"}},
		{"wildcard covers one label only", []string{"a.b.example.com"},
			[]Cert{c("w", year, "*.example.com")}, nil, []string{"a.b.example.com"}},
		{"hosts are normalized", []string{"A.example.com.", "a.example.com", ""},
			[]Cert{c("e", year, "a.example.com")}, []string{"e"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Select(tc.hosts, tc.certs, now, "")
			if !slices.Equal(got.Certificates, tc.want) || !slices.Equal(got.Uncovered, tc.uncovered) {
				t.Errorf("Select = %+v, want certificates %v uncovered %v", got, tc.want, tc.uncovered)
			}
		})
	}
}

func TestSelectKeepsDefault(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := func(arn, name string) Cert {
		return Cert{ARN: arn, Names: []string{name}, Status: "ISSUED", NotAfter: now.AddDate(1, 0, 0)}
	}
	certs := []Cert{c("b", "b.test"), c("c", "c.test"), c("a", "a.test")}
	if got := Select([]string{"b.test", "c.test"}, certs, now, "").Certificates; !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("without a current default: %v", got)
	}
	// A new host whose certificate sorts first does not move the default.
	if got := Select([]string{"a.test", "b.test", "c.test"}, certs, now, "b").Certificates; !slices.Equal(got, []string{"b", "a", "c"}) {
		t.Fatalf("with current default b: %v", got)
	}
	// A default no longer chosen gives way.
	if got := Select([]string{"a.test"}, certs, now, "b").Certificates; !slices.Equal(got, []string{"a"}) {
		t.Fatalf("default not chosen: %v", got)
	}
}

func TestSelectLimit(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var hosts []string
	var certs []Cert
	for i := range 30 {
		h := fmt.Sprintf("h%02d.example.com", i)
		hosts = append(hosts, h)
		certs = append(certs, Cert{ARN: fmt.Sprintf("arn-%02d", i), Names: []string{h}, Status: "ISSUED", NotAfter: now.AddDate(1, 0, 0)})
	}
	got := Select(hosts, certs, now, "")
	if len(got.Certificates) != MaxCertificates || len(got.Excess) != 5 || got.Certificates[0] != "arn-00" || got.Excess[0] != "h25.example.com" {
		t.Fatalf("Select = %+v", got)
	}
	// Deterministic whatever the input order.
	slices.Reverse(hosts)
	slices.Reverse(certs)
	again := Select(hosts, certs, now, "")
	if !slices.Equal(got.Certificates, again.Certificates) || !slices.Equal(got.Excess, again.Excess) {
		t.Fatalf("order changed the selection: %v vs %v", got, again)
	}
}

func FuzzCovers(f *testing.F) {
	for _, s := range [][2]string{{"*.example.com", "a.example.com"}, {"a.b", "A.B."}, {"*.", "."}, {"*.*.a", "b.c.a"}, {"", "x"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, name, host string) {
		got := Covers(name, host)
		if got != Covers(strings.ToUpper(name), strings.ToLower(host)) && isASCII(name+host) {
			t.Fatalf("case changed Covers(%q, %q)", name, host)
		}
		if !got {
			return
		}
		n, h := strings.ToLower(strings.TrimRight(name, ".")), strings.ToLower(strings.TrimRight(host, "."))
		if n != h {
			rest, ok := strings.CutPrefix(n, "*.")
			if !ok || strings.Count(h, ".") != strings.Count(rest, ".")+1 || !strings.HasSuffix(h, "."+rest) {
				t.Fatalf("Covers(%q, %q) but the wildcard does not cover exactly one label", name, host)
			}
		}
		now := time.Now()
		sel := Select([]string{host}, []Cert{{ARN: "x", Names: []string{name}, Status: "ISSUED", NotAfter: now.AddDate(1, 0, 0)}}, now, "")
		if strings.TrimSpace(host) == host && len(sel.Certificates) != 1 {
			t.Fatalf("Select(%q) with a covering %q = %+v", host, name, sel)
		}
	})
}

func isASCII(s string) bool {
	for _, r := range s {
		if r > 127 {
			return false
		}
	}
	return true
}
