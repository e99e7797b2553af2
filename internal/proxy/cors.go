package proxy

import (
	"net/http"
	"strconv"
	"strings"

	"sluice.dev/sluice/internal/route"
)

// corsView answers CORS (the Fetch standard's protocol) for a route: the
// proxy answers preflights itself and adds Access-Control-* headers to the
// other responses of allowed origins. Credentials never go with origin "*"
// (translate refuses that combination).
type corsView struct {
	any      bool
	exact    map[string]bool
	patterns []originPattern
	// Header values, nil for none.
	methods, headers, expose, maxAge []string
	credentials                      bool
}

// originPattern matches "scheme://" + one or more DNS labels + suffix.
type originPattern struct{ prefix, suffix string }

var (
	valStar       = []string{"*"}
	valTrue       = []string{"true"}
	valVaryOrigin = []string{"Origin"}
)

func newCORSView(c *route.CORS) *corsView {
	v := &corsView{any: c.AnyOrigin, credentials: c.Credentials}
	if len(c.Origins) > 0 {
		v.exact = make(map[string]bool, len(c.Origins))
		for _, o := range c.Origins {
			v.exact[o] = true
		}
	}
	for _, s := range c.OriginSuffixes {
		if i := strings.Index(s, "://."); i > 0 {
			v.patterns = append(v.patterns, originPattern{prefix: s[:i+3], suffix: s[i+3:]})
		}
	}
	value := func(s string) []string {
		if s == "" {
			return nil
		}
		return []string{s}
	}
	v.methods, v.headers, v.expose = value(c.Methods), value(c.Headers), value(c.ExposeHeaders)
	if c.MaxAge >= 0 {
		v.maxAge = []string{strconv.FormatInt(int64(c.MaxAge.Seconds()), 10)}
	}
	return v
}

// allows reports whether origin may read the responses.
func (v *corsView) allows(origin string) bool {
	if v.any {
		return true
	}
	if v.exact[origin] {
		return true
	}
	for _, p := range v.patterns {
		if len(origin) > len(p.prefix)+len(p.suffix) && strings.HasPrefix(origin, p.prefix) && strings.HasSuffix(origin, p.suffix) &&
			dnsLabels(origin[len(p.prefix):len(origin)-len(p.suffix)]) {
			return true
		}
	}
	return false
}

// dnsLabels accepts one or more dot-separated labels of lower-case letters,
// digits and hyphens.
func dnsLabels(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' && s[i-1] != '.') {
			return false
		}
	}
	return true
}

// handle adds the CORS headers for r to w and answers a preflight (then it
// returns true and the request is done).
func (v *corsView) handle(w http.ResponseWriter, r *http.Request) bool {
	h := w.Header()
	if !v.any {
		// The answer depends on Origin: caches must keep them apart.
		h["Vary"] = valVaryOrigin
	}
	origins := r.Header["Origin"]
	if len(origins) != 1 {
		return false // not a CORS request
	}
	origin := origins[0]
	allowed := v.allows(origin)
	if !allowed {
		// The route's policy decides, not the upstream's headers: nil
		// values keep respond from copying them, and write nothing.
		h["Access-Control-Allow-Origin"] = nil
		h["Access-Control-Allow-Credentials"] = nil
	} else {
		if v.any {
			h["Access-Control-Allow-Origin"] = valStar
		} else {
			h["Access-Control-Allow-Origin"] = []string{origin}
		}
		if v.credentials {
			h["Access-Control-Allow-Credentials"] = valTrue
		}
	}
	if r.Method != http.MethodOptions || len(r.Header["Access-Control-Request-Method"]) == 0 {
		if allowed && v.expose != nil {
			h["Access-Control-Expose-Headers"] = v.expose
		}
		return false
	}
	// A preflight. Not allowed: an answer without CORS headers, which the
	// browser takes as a refusal.
	if allowed {
		if v.methods != nil {
			h["Access-Control-Allow-Methods"] = v.methods
		}
		if v.headers != nil {
			h["Access-Control-Allow-Headers"] = v.headers
		}
		if v.maxAge != nil {
			h["Access-Control-Max-Age"] = v.maxAge
		}
	}
	h["Content-Length"] = valZero
	w.WriteHeader(http.StatusNoContent)
	return true
}

var valZero = []string{"0"}

// corsHeader reports whether k is a response header CORS sets: the
// proxy's value stands over the upstream's.
func corsHeader(k string) bool {
	return strings.HasPrefix(k, "Access-Control-")
}
