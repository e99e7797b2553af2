package translate

import (
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/internal/route"
)

var policyKeys = []string{
	AnnotationAllowSourceRange, AnnotationDenySourceRange, AnnotationMaxBodySize,
	AnnotationCORSEnable, AnnotationCORSAllowOrigin, AnnotationCORSAllowMethods, AnnotationCORSAllowHeaders,
	AnnotationCORSExposeHeaders, AnnotationCORSAllowCredentials, AnnotationCORSMaxAge,
	AnnotationLimitRPS, AnnotationLimitRPM, AnnotationLimitBurst, AnnotationLimitConnections,
	AnnotationLimitExemptSourceRange, AnnotationLimitStatus,
	AnnotationAuthType, AnnotationAuthSecret, AnnotationAuthRealm,
	AnnotationAuthURL, AnnotationAuthSignin, AnnotationAuthResponseHeaders, AnnotationAuthTimeout,
	AnnotationCustomHTTPErrors, AnnotationErrorBackend,
}

// FuzzPolicies feeds arbitrary request-policy annotations and an arbitrary
// htpasswd Secret to Build: no panic, valid route.Policies, and problems
// that never quote a value.
func FuzzPolicies(f *testing.F) {
	f.Add(uint32(0xfff80000), "", "", "http://auth.default.svc:8080/check?x=1", "X-User", "2", "", "", "")
	f.Add(uint32(0xfff80000), "", "", "http://169.254.169.254/", "X-User", "2", "", "", "")
	f.Add(uint32(0xffffffff), "10.0.0.0/8, ::1", "8m", "https://*.example.com, *", "GET, POST", "5", "basic", "users", "alice:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\n")
	f.Add(uint32(0x00000007), "300.0.0.0/8,,", "1.5g", "http://[::1]:8080", "bad method", "-1", "digest", "other/x", "bob:$2y$05$abc\n#c\n")
	f.Add(uint32(0x0000ffff), "::ffff:10.0.0.0/100", "64g", "https://a.example.com/x", "*", "1000001", "basic", "", ":{SHA}\n\x00:\xff")
	f.Add(uint32(0x55555555), "fe80::1%eth0", "0", "HTTPS://A.EXAMPLE.COM:443", "X-A,X-A", "true", "basic ", "users", strings.Repeat("u:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\n", 3))
	f.Fuzz(func(t *testing.T, set uint32, cidrs, size, origins, tokens, number, typ, secret, htpasswd string) {
		vals := []string{cidrs, cidrs, size, number, origins, tokens, tokens, tokens, number, number,
			number, number, number, number, cidrs, number, typ, secret, tokens, origins, origins, tokens, number, number, secret}
		ann := map[string]string{}
		for i, k := range policyKeys {
			if set&(1<<i) != 0 {
				ann[k] = vals[i]
			}
		}
		ing := fuzzIngress("annotated", "a.example.com", "/", networkingv1.PathTypePrefix, "", 80)
		ing.Annotations = ann
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ing.Namespace, Name: "users"},
			Data: map[string][]byte{AuthSecretKey: []byte(htpasswd)}}
		cfg, problems := Build(Input{Ingresses: []*networkingv1.Ingress{ing}, Secrets: []*corev1.Secret{sec}}, Options{})
		checkInvariants(t, &cfg)
		for _, pr := range problems {
			if pr.Reason != "InvalidAnnotation" && pr.Reason != "ServiceNotFound" && pr.Reason != ReasonAuthSecret {
				t.Errorf("unexpected problem %+v", pr)
			}
			for _, v := range append(vals, htpasswd) {
				if len(v) >= 4 && quotable(v) && strings.Contains(pr.Message, v) && !strings.Contains(fixedPhrases, v) {
					t.Errorf("problem %q quotes the value %q", pr.Message, v)
				}
			}
		}
		for _, vh := range cfg.VirtualHosts {
			for _, rt := range vh.Routes {
				checkPolicies(t, rt.Policies)
			}
		}
	})
}

// fixedPhrases are the parts of problem messages with bytes quotable
// looks for: a value found in them was not quoted.
const fixedPhrases = `user:{SHA}hash, user:$apr1$salt$hash or user:$2y$cost$bcrypt entries (crypt hashes are not supported) or repeat a user: ` +
	` (each check would cost the proxy too much CPU): ` + `; those users cannot log in (rehash with htpasswd -B -C 10)` +
	`"*" or origins such as https://app.example.com or https://*.example.com separated by commas` +
	`http://SERVICE.NAMESPACE.svc[:PORT]/path naming a Service of the namespace of the Ingress (other URLs need the proxy flag --forward-auth-any-url)` +
	`: "true"` + ` (in a cluster it needs the label sluice.dev/auth-secret: "true")`

func checkPolicies(t *testing.T, p *route.Policies) {
	t.Helper()
	if p == nil {
		return
	}
	if *p == (route.Policies{}) {
		t.Error("empty Policies instead of nil")
	}
	if a := p.Access; a != nil {
		for _, pf := range append(a.Allow, a.Deny...) {
			if !pf.IsValid() || pf != pf.Masked() || pf.Addr().Is4In6() || pf.Addr().Zone() != "" {
				t.Errorf("invalid prefix %v", pf)
			}
		}
	}
	if b := p.BodyLimit; b != nil && (b.MaxBytes <= 0 || b.MaxBytes > MaxBodySize) {
		t.Errorf("max body %d", b.MaxBytes)
	}
	if c := p.CORS; c != nil {
		if c.AnyOrigin && (c.Credentials || len(c.Origins)+len(c.OriginSuffixes) > 0) {
			t.Errorf("any origin with credentials or a list: %+v", c)
		}
		for _, o := range append(append([]string{}, c.Origins...), c.OriginSuffixes...) {
			if o != strings.ToLower(o) || !httpguts.ValidHeaderFieldValue(o) || strings.ContainsAny(o, " ,/*") && !strings.Contains(o, "://") {
				t.Errorf("invalid origin %q", o)
			}
		}
		for _, v := range []string{c.Methods, c.Headers, c.ExposeHeaders} {
			if !httpguts.ValidHeaderFieldValue(v) {
				t.Errorf("invalid header value %q", v)
			}
		}
		if c.MaxAge < 0 || c.MaxAge > maxCORSMaxAge {
			t.Errorf("max-age %s", c.MaxAge)
		}
	}
	if l := p.RateLimit; l != nil {
		if l.Status < 400 || l.Status > 599 || l.RPS < 0 || l.RPM < 0 || l.Concurrent < 0 || l.RPS+l.RPM+l.Concurrent == 0 ||
			l.RPS > 0 && l.BurstRPS < 1 || l.RPM > 0 && l.BurstRPM < 1 {
			t.Errorf("invalid rate limit %+v", l)
		}
	}
	if f := p.ForwardAuth; f != nil {
		switch {
		case f.URL != "":
			t.Errorf("any URL accepted without ForwardAuthAnyURL: %q", f.URL)
		case !f.Refuse && (f.Backend == nil || f.Backend.Namespace != "default"):
			t.Errorf("forward auth to %+v", f.Backend)
		case !httpguts.ValidHeaderFieldValue(f.SignIn) || !httpguts.ValidHeaderFieldValue(f.Host):
			t.Errorf("invalid sign-in URL or host %q %q", f.SignIn, f.Host)
		case !f.Refuse && (f.Timeout <= 0 || f.Timeout > maxAuthTimeout || !strings.HasPrefix(f.Path, "/")):
			t.Errorf("invalid forward auth %+v", f)
		}
	}
	if e := p.ErrorPages; e != nil {
		if len(e.Codes) == 0 || !slices.IsSorted(e.Codes) || e.Codes[0] < 400 || e.Codes[len(e.Codes)-1] > 599 || e.Backend == nil || e.Backend.Namespace != "default" {
			t.Errorf("invalid error pages %+v", e)
		}
	}
	if a := p.BasicAuth; a != nil {
		if !a.Refuse && len(a.Users) == 0 || !isPrintNoQuote(a.Realm) || a.Realm == "" {
			t.Errorf("invalid basic auth %+v", a)
		}
		for u, h := range a.Users {
			if !isPrintNoQuote(u) || strings.Contains(u, ":") || !validSHAHash(h) && !validAPR1Hash(h) {
				t.Errorf("invalid user entry %q", u)
			}
		}
	}
}
