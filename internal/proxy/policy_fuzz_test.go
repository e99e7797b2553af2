package proxy

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http/httpguts"

	"sluice.dev/sluice/internal/route"
)

// FuzzCORSOrigin feeds arbitrary Origin and preflight headers to a route's
// CORS handling: an Access-Control-Allow-Origin sent is "*" or an origin
// the configuration allows, echoed only when it is a valid header value.
func FuzzCORSOrigin(f *testing.F) {
	f.Add("https://app.example.com", "OPTIONS", "POST")
	f.Add("https://a.b.example.org", "GET", "")
	f.Add("https://.example.org", "OPTIONS", "GET")
	f.Add("https://evil.example/.example.org", "GET", "")
	f.Add("https://x\r\nSet-Cookie: a=b.example.org", "OPTIONS", "PUT")
	f.Add("null", "OPTIONS", "x")
	c := newCORSView(&route.CORS{Origins: []string{"https://app.example.com"}, OriginSuffixes: []string{"https://.example.org"},
		Methods: "GET", Credentials: true, MaxAge: time.Minute})
	f.Fuzz(func(t *testing.T, origin, method, reqMethod string) {
		if !httpguts.ValidHeaderFieldValue(origin) || !httpguts.ValidHeaderFieldValue(reqMethod) || method == "" {
			return // net/http refuses such requests before a handler sees them
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Method = method
		r.Header["Origin"] = []string{origin}
		if reqMethod != "" {
			r.Header["Access-Control-Request-Method"] = []string{reqMethod}
		}
		w := httptest.NewRecorder()
		c.handle(w, r)
		acao := w.Header()["Access-Control-Allow-Origin"]
		if len(acao) == 0 {
			return
		}
		got := acao[0]
		if got != origin || !httpguts.ValidHeaderFieldValue(got) {
			t.Fatalf("Access-Control-Allow-Origin %q for origin %q", got, origin)
		}
		if got != "https://app.example.com" && (!strings.HasPrefix(got, "https://") || !strings.HasSuffix(got, ".example.org") ||
			strings.ContainsAny(got[len("https://"):len(got)-len(".example.org")], "/:@ ")) {
			t.Fatalf("origin %q allowed", got)
		}
	})
}
