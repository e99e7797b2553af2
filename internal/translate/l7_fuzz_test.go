package translate

import (
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"sluice.dev/sluice/internal/route"
)

var l7Keys = []string{
	AnnotationRewriteTarget, AnnotationUseRegex, AnnotationAppRoot,
	AnnotationPermanentRedirect, AnnotationPermanentRedirectCode,
	AnnotationTemporaryRedirect, AnnotationTemporaryRedirectCode,
	AnnotationRequestHeadersSet, AnnotationRequestHeadersAdd, AnnotationRequestHeadersRemove,
	AnnotationResponseHeadersSet, AnnotationResponseHeadersAdd, AnnotationResponseHeadersRemove,
	AnnotationUpstreamVhost, AnnotationXForwardedPrefix,
	AnnotationCanary, AnnotationCanaryWeight, AnnotationCanaryWeightTotal, AnnotationCanaryByHeader,
	AnnotationCanaryByHeaderValue, AnnotationCanaryByCookie, AnnotationCanarySticky,
}

// FuzzL7Annotations feeds arbitrary values of the rewrite, redirect,
// header and canary annotations (native, and through the ingress-nginx
// table) and regex paths to the parsers and to Build: no panic, problems
// that never quote a value, filters whose values are safe on the wire.
func FuzzL7Annotations(f *testing.F) {
	f.Add(uint32(0x3), "/v2/$1", "true", "/shop(/|$)(.*)", false)
	f.Add(uint32(0x18), "https://a.example.com/x", "308", "/", true)
	f.Add(uint32(0x380), "X-A: b\nX-C: d", "x-a, x-b", "/p", false)
	f.Add(uint32(0x6000), "a.example.com:8080", "/api", "/", true)
	f.Add(uint32(0x3f8000), "true", "50", "/", false)
	f.Add(uint32(0xffffffff), "$scheme\r\nHost: x", "\x00", "(", true)
	f.Add(uint32(0x1), "/$1x${2}$", "yes", "[a-z]{1000}{1000}", true)
	f.Fuzz(func(t *testing.T, set uint32, v1, v2, path string, nginx bool) {
		ann := map[string]string{}
		for i, k := range l7Keys {
			if set&(1<<i) != 0 {
				v := v1
				if i%2 == 1 {
					v = v2
				}
				if nginx {
					k = NginxAnnotationPrefix + strings.TrimPrefix(k, "sluice.dev/")
				}
				ann[k] = v
			}
		}
		native := ann
		if nginx {
			native, _ = nginxToNative(ann)
		}
		a, errs := parseL7(native, nginx)
		checkNoQuote(t, ann, errs)
		checkL7(t, &a)
		c, errs := parseCanary(native)
		checkNoQuote(t, ann, errs)
		if c.weight > c.total || c.total == 0 {
			t.Errorf("canary weight %d of %d", c.weight, c.total)
		}
		pt, p, msg := a.routePath(route.PathPrefix, path)
		if msg == "" && pt == route.PathRegex {
			if _, err := route.CompilePath(p); err != nil {
				t.Errorf("accepted regex path does not compile: %v", err)
			}
		}

		cls := "sluice"
		if nginx {
			cls = "nginx"
		}
		main := fuzzIngress("main", "a.example.com", "/", networkingv1.PathTypePrefix, "", 80)
		ing := fuzzIngress("annotated", "a.example.com", path, networkingv1.PathTypeImplementationSpecific, "", 80)
		ing.Annotations = ann
		for _, x := range []*networkingv1.Ingress{main, ing} {
			x.Spec.IngressClassName = &cls
		}
		cfg, _ := Build(Input{Ingresses: []*networkingv1.Ingress{main, ing}}, Options{IngressNginx: &IngressNginx{}})
		checkInvariants(t, &cfg)
		_ = route.New(cfg)
	})
}

// checkNoQuote: problems name annotations present and never quote values.
func checkNoQuote(t *testing.T, ann map[string]string, errs []annotationError) {
	t.Helper()
	for _, e := range errs {
		for _, val := range ann {
			// Short values occur in any message ("$", "'s").
			if len(val) >= 4 && quotable(val) && strings.Contains(e.msg, val) {
				t.Errorf("problem %q quotes the value %q", e.msg, val)
			}
		}
	}
}

// checkL7 asserts what reaches the proxy is safe: header names valid and
// not hop-by-hop, values and paths without control characters.
func checkL7(t *testing.T, a *l7Annotations) {
	t.Helper()
	ctl := func(s string) bool {
		return strings.IndexFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0
	}
	for _, hf := range []*route.HeaderFilter{a.reqHeaders, a.respHeaders} {
		if hf == nil {
			continue
		}
		for _, h := range append(append([]route.Header{}, hf.Set...), hf.Add...) {
			if _, ok := headerName(h.Name); !ok || ctl(strings.ReplaceAll(h.Value, "\t", " ")) { // HTAB is valid
				t.Errorf("unsafe header %q: %q", h.Name, h.Value)
			}
		}
		for _, n := range hf.Remove {
			if forbiddenFilterHeaders[n] {
				t.Errorf("removes %s", n)
			}
		}
	}
	if ctl(a.rewrite) || ctl(a.appRoot) || ctl(a.upstreamHost) || strings.ContainsAny(a.upstreamHost, "/ ") {
		t.Errorf("unsafe rewrite %q app-root %q host %q", a.rewrite, a.appRoot, a.upstreamHost)
	}
	if rd := a.redirect; rd != nil {
		if ctl(rd.Host) || strings.ContainsAny(rd.Host, "/?#@ ") || rd.Path == nil || ctl(rd.Path.Value) ||
			!strings.HasPrefix(rd.Path.Value, "/") || strings.HasPrefix(rd.Path.Value, "//") && rd.Host == "" {
			t.Errorf("unsafe redirect %+v", rd)
		}
		switch rd.StatusCode {
		case 301, 302, 307, 308:
		default:
			t.Errorf("redirect code %d", rd.StatusCode)
		}
	}
}

// FuzzNginxTable: any annotation map translates without panic; every
// nginx key is either mapped, refused or listed; no nginx key survives.
func FuzzNginxTable(f *testing.F) {
	f.Add("rewrite-target", "/$1", "configuration-snippet", "x", "enable-cors", "true")
	f.Add("canary", "true", "lua-resty-waf", "active", "\xff", "\x00")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3 string) {
		in := map[string]string{NginxAnnotationPrefix + k1: v1, NginxAnnotationPrefix + k2: v2, k3: v3}
		out, res := nginxToNative(in)
		for k := range out {
			if strings.HasPrefix(k, NginxAnnotationPrefix) {
				t.Errorf("nginx key %q survived", k)
			}
		}
		n := 0
		for k := range in {
			if strings.HasPrefix(k, NginxAnnotationPrefix) {
				n++
			}
		}
		mapped := 0
		for k := range in {
			if name, ok := strings.CutPrefix(k, NginxAnnotationPrefix); ok {
				if row, ok := nginxRow(name); ok && row.Status == NginxSupported {
					mapped++
				}
			}
		}
		if got := len(res.refused) + len(res.unsupported) + len(res.invalid) + mapped; got != n {
			t.Errorf("%d nginx annotations, %d accounted for", n, got)
		}
		for _, k := range append(append(res.refused, res.unsupported...), res.invalid...) {
			if name := annotationName(k); name != k && !strings.HasPrefix(name, "(") {
				t.Errorf("annotation name %q reported as %q", k, name)
			}
		}
	})
}
