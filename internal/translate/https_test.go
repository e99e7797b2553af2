package translate

import (
	"strings"
	"testing"
)

func TestParseHTTPS(t *testing.T) {
	cases := []struct {
		name     string
		ann      map[string]string
		redirect bool
		hsts     string
		errs     int
	}{
		{"defaults", nil, true, "", 0},
		{"redirect off", map[string]string{AnnotationSSLRedirect: "false"}, false, "", 0},
		{"redirect bad", map[string]string{AnnotationSSLRedirect: "False"}, true, "", 1},
		{"hsts", map[string]string{AnnotationHSTSMaxAge: "300"}, true, "max-age=300", 0},
		{"hsts duration", map[string]string{AnnotationHSTSMaxAge: "2h"}, true, "max-age=7200", 0},
		{"hsts zero clears", map[string]string{AnnotationHSTSMaxAge: "0"}, true, "max-age=0", 0},
		{"hsts too long", map[string]string{AnnotationHSTSMaxAge: "17521h"}, true, "", 1},
		{"hsts fraction", map[string]string{AnnotationHSTSMaxAge: "1500ms"}, true, "", 1},
		{"subdomains", map[string]string{AnnotationHSTSMaxAge: "60", AnnotationHSTSIncludeSubdomains: "true"}, true, "max-age=60; includeSubDomains", 0},
		{"subdomains alone", map[string]string{AnnotationHSTSIncludeSubdomains: "true"}, true, "", 1},
		{"subdomains false alone", map[string]string{AnnotationHSTSIncludeSubdomains: "false"}, true, "", 0},
		{"preload", map[string]string{AnnotationHSTSMaxAge: "31536000", AnnotationHSTSIncludeSubdomains: "true", AnnotationHSTSPreload: "true"},
			true, "max-age=31536000; includeSubDomains; preload", 0},
		{"preload without subdomains", map[string]string{AnnotationHSTSMaxAge: "31536000", AnnotationHSTSPreload: "true"},
			true, "max-age=31536000", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hp, errs := parseHTTPS(tc.ann, true)
			if hp.redirect != tc.redirect || hp.hsts != tc.hsts || len(errs) != tc.errs {
				t.Errorf("got redirect=%v hsts=%q %d problems %v; want %v %q %d", hp.redirect, hp.hsts, len(errs), errs, tc.redirect, tc.hsts, tc.errs)
			}
		})
	}
}

// TestSSLRedirectDefault: the redirect is opt-in; Options.SSLRedirect
// turns it on for Ingresses without the annotation, and the annotation
// wins either way; an invalid value takes the default.
func TestSSLRedirectDefault(t *testing.T) {
	for _, tc := range []struct {
		def  bool
		ann  map[string]string
		want bool
		errs int
	}{
		{false, nil, false, 0},
		{true, nil, true, 0},
		{false, map[string]string{AnnotationSSLRedirect: "true"}, true, 0},
		{true, map[string]string{AnnotationSSLRedirect: "false"}, false, 0},
		{false, map[string]string{AnnotationSSLRedirect: "yes"}, false, 1},
		{true, map[string]string{AnnotationSSLRedirect: "yes"}, true, 1},
	} {
		hp, errs := parseHTTPS(tc.ann, tc.def)
		if hp.redirect != tc.want || len(errs) != tc.errs {
			t.Errorf("default %v, %v: redirect %v with %d problems, want %v with %d", tc.def, tc.ann, hp.redirect, len(errs), tc.want, tc.errs)
		}
	}
}

func TestCoveredByTLS(t *testing.T) {
	b := &builder{
		tlsHosts: map[string]string{"a.example.com": "ns", "*.apps.example.com": "ns"},
		own: &Ownership{on: true, owner: map[string]string{
			"a.example.com": "ns", "x.apps.example.com": "ns", "other.apps.example.com": "other",
			"shared.apps.example.com": "other",
		}, shared: map[string]map[string]bool{"shared.apps.example.com": {"ns": true}}},
	}
	for host, want := range map[string]bool{
		"a.example.com": true, "b.example.com": false, "x.apps.example.com": true,
		"y.x.apps.example.com": false, "*.apps.example.com": true, "*.example.com": false, "": false,
		"other.apps.example.com": false, "shared.apps.example.com": true, "unowned.apps.example.com": true,
	} {
		if got := b.coveredByTLS(host); got != want {
			t.Errorf("coveredByTLS(%q) = %v, want %v", host, got, want)
		}
	}
}

// FuzzHTTPSAnnotations: any annotation values give a valid header value
// (printable ASCII, no line breaks) and problems that never quote a value.
func FuzzHTTPSAnnotations(f *testing.F) {
	f.Add("true", "31536000", "true", "true")
	f.Add("false", "1h", "false", "")
	f.Add("no", "-1", "yes", "\x00")
	f.Add("", "99999999999999999999", "true\r\n", "1")
	f.Fuzz(func(t *testing.T, redirect, maxAge, sub, preload string) {
		ann := map[string]string{
			AnnotationSSLRedirect: redirect, AnnotationHSTSMaxAge: maxAge,
			AnnotationHSTSIncludeSubdomains: sub, AnnotationHSTSPreload: preload,
		}
		hp, errs := parseHTTPS(ann, false)
		for i := 0; i < len(hp.hsts); i++ {
			if c := hp.hsts[i]; c < ' ' || c > '~' {
				t.Fatalf("hsts %q has byte %#x", hp.hsts, c)
			}
		}
		if hp.hsts != "" && !strings.HasPrefix(hp.hsts, "max-age=") {
			t.Fatalf("hsts %q", hp.hsts)
		}
		for _, e := range errs {
			for _, v := range ann {
				if quotable(v) && strings.Contains(e.msg, v) {
					t.Errorf("problem %q quotes %q", e.msg, v)
				}
			}
		}
	})
}

func TestFatal(t *testing.T) {
	ps := []Problem{
		{Kind: "Ingress", Namespace: "ns", Name: "a", Reason: "Conflict"},
		{Kind: "Ingress", Namespace: "ns", Name: "b", Reason: ReasonNotServed},
		{Kind: "Secret", Namespace: "ns", Name: "c", Reason: ReasonNotServed},
	}
	for name, want := range map[string]bool{"a": false, "b": true, "c": false, "d": false} {
		if got := Fatal(ps, "ns", name); got != want {
			t.Errorf("Fatal(%s) = %v, want %v", name, got, want)
		}
	}
}
