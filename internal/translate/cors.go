package translate

import (
	"strings"
	"time"

	"sluice.dev/sluice/internal/route"
)

// Annotations of CORS (route.CORS). The proxy answers preflights (OPTIONS
// with Origin and Access-Control-Request-Method) itself and adds the
// Access-Control-* headers to the other responses of allowed origins.
const (
	// AnnotationCORSEnable: "true" turns CORS on; the others have no effect
	// without it.
	AnnotationCORSEnable = "sluice.dev/cors-enable"
	// AnnotationCORSAllowOrigin lists allowed origins separated by commas:
	// "*" (every origin), exact origins ("https://app.example.com") and
	// wildcard ones ("https://*.example.com": any subdomain). Default "*".
	AnnotationCORSAllowOrigin = "sluice.dev/cors-allow-origin"
	// AnnotationCORSAllowMethods: methods separated by commas; default
	// DefaultCORSMethods.
	AnnotationCORSAllowMethods = "sluice.dev/cors-allow-methods"
	// AnnotationCORSAllowHeaders: request header names separated by
	// commas; default DefaultCORSHeaders.
	AnnotationCORSAllowHeaders = "sluice.dev/cors-allow-headers"
	// AnnotationCORSExposeHeaders: response header names separated by
	// commas; default none.
	AnnotationCORSExposeHeaders = "sluice.dev/cors-expose-headers"
	// AnnotationCORSAllowCredentials: "true" sends
	// Access-Control-Allow-Credentials; default "false". The CORS protocol
	// forbids it with origin "*": then it is refused with a problem.
	AnnotationCORSAllowCredentials = "sluice.dev/cors-allow-credentials"
	// AnnotationCORSMaxAge: how long a browser may cache a preflight,
	// seconds or a Go duration up to 8760h; default DefaultCORSMaxAge.
	AnnotationCORSMaxAge = "sluice.dev/cors-max-age"
)

// CORS defaults (ingress-nginx's method and header lists).
const (
	DefaultCORSMethods = "GET, PUT, POST, DELETE, PATCH, OPTIONS"
	DefaultCORSHeaders = "DNT, Keep-Alive, User-Agent, X-Requested-With, If-Modified-Since, Cache-Control, Content-Type, Range, Authorization"
	DefaultCORSMaxAge  = 24 * time.Hour
	maxCORSMaxAge      = 365 * 24 * time.Hour
	maxCORSEntries     = 100
)

func parseCORS(ann map[string]string, errs []annotationError) (*route.CORS, []annotationError) {
	fail := func(key, msg string) { errs = append(errs, annotationError{key, msg}) }
	on := false
	if v, ok := ann[AnnotationCORSEnable]; ok {
		b, valid := parseBool(v)
		if !valid {
			fail(AnnotationCORSEnable, `must be "true" or "false"; CORS is off`)
		}
		on = b
	}
	if !on {
		for _, k := range []string{AnnotationCORSAllowOrigin, AnnotationCORSAllowMethods, AnnotationCORSAllowHeaders,
			AnnotationCORSExposeHeaders, AnnotationCORSAllowCredentials, AnnotationCORSMaxAge} {
			if _, ok := ann[k]; ok {
				fail(k, "has no effect without "+AnnotationCORSEnable+`: "true"`)
			}
		}
		return nil, errs
	}
	c := &route.CORS{AnyOrigin: true, Methods: DefaultCORSMethods, Headers: DefaultCORSHeaders, MaxAge: DefaultCORSMaxAge}
	if v, ok := ann[AnnotationCORSAllowOrigin]; ok {
		var valid bool
		c.AnyOrigin, c.Origins, c.OriginSuffixes, valid = parseOrigins(v)
		if !valid {
			fail(AnnotationCORSAllowOrigin, `must be "*" or origins such as https://app.example.com or https://*.example.com separated by commas, at most 100; invalid entries are left out`)
		}
	}
	for _, t := range []struct {
		key string
		dst *string
	}{
		{AnnotationCORSAllowMethods, &c.Methods},
		{AnnotationCORSAllowHeaders, &c.Headers},
		{AnnotationCORSExposeHeaders, &c.ExposeHeaders},
	} {
		if v, ok := ann[t.key]; ok {
			list, valid := parseTokenList(v)
			if !valid {
				fail(t.key, "must be HTTP tokens separated by commas, at most 100; invalid entries are left out")
			}
			*t.dst = list
		}
	}
	if v, ok := ann[AnnotationCORSAllowCredentials]; ok {
		b, valid := parseBool(v)
		switch {
		case !valid:
			fail(AnnotationCORSAllowCredentials, `must be "true" or "false"; using false`)
		case b && c.AnyOrigin:
			fail(AnnotationCORSAllowCredentials, `cannot be "true" with origin "*" (the CORS protocol forbids it); list the origins; using false`)
		default:
			c.Credentials = b
		}
	}
	if v, ok := ann[AnnotationCORSMaxAge]; ok {
		d, valid := parseDuration(v, maxCORSMaxAge)
		if !valid || d%time.Second != 0 {
			fail(AnnotationCORSMaxAge, "must be whole seconds (e.g. 600) up to 8760h; using 86400")
			d = DefaultCORSMaxAge
		}
		c.MaxAge = d
	}
	return c, errs
}

// parseOrigins reads a comma-separated origin list. A "*" entry allows
// every origin; exact origins are lower-cased; "scheme://*.suffix[:port]"
// becomes the pattern "scheme://" + ".suffix[:port]". ok is false when an
// entry was invalid or the list too long.
func parseOrigins(v string) (any bool, exact, suffixes []string, ok bool) {
	ok = true
	if len(v) > maxListLen {
		v, ok = v[:maxListLen], false
	}
	n := 0
	for s := range strings.SplitSeq(v, ",") {
		s = strings.ToLower(strings.TrimSpace(s))
		if s == "" {
			continue
		}
		if n++; n > maxCORSEntries {
			ok = false
			break
		}
		if s == "*" {
			any = true
			continue
		}
		scheme, rest, found := strings.Cut(s, "://")
		if !found || !validScheme(scheme) {
			ok = false
			continue
		}
		if host, wild := strings.CutPrefix(rest, "*."); wild {
			if !validOriginHost(host) {
				ok = false
				continue
			}
			suffixes = appendNew(suffixes, scheme+"://."+host)
			continue
		}
		if !validOriginHost(rest) {
			ok = false
			continue
		}
		exact = appendNew(exact, scheme+"://"+rest)
	}
	if any {
		exact, suffixes = nil, nil
	}
	return any, exact, suffixes, ok
}

func appendNew(list []string, s string) []string {
	for _, o := range list {
		if o == s {
			return list
		}
	}
	return append(list, s)
}

func validScheme(s string) bool {
	if s == "" || len(s) > 32 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// validOriginHost accepts a lower-case DNS name or IPv4 address with an
// optional port, or a bracketed IPv6 literal with an optional port.
func validOriginHost(s string) bool {
	if s == "" || len(s) > 260 {
		return false
	}
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		i := strings.IndexByte(s, ']')
		if i < 0 {
			return false
		}
		host, port = s[1:i], s[i+1:]
		if host == "" || strings.Trim(host, "0123456789abcdef:.") != "" {
			return false
		}
		if port != "" && port[0] != ':' {
			return false
		}
		port = strings.TrimPrefix(port, ":")
	} else if i := strings.IndexByte(s, ':'); i >= 0 {
		host, port = s[:i], s[i+1:]
		if host == "" {
			return false
		}
		for j := 0; j < len(host); j++ {
			c := host[j]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
				return false
			}
		}
	} else {
		for j := 0; j < len(host); j++ {
			c := host[j]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
				return false
			}
		}
	}
	if port != "" || strings.HasSuffix(s, ":") {
		if port == "" || len(port) > 5 || strings.Trim(port, "0123456789") != "" {
			return false
		}
	}
	return true
}

// parseTokenList reads HTTP tokens separated by commas and returns them
// joined with ", "; invalid entries are left out.
func parseTokenList(v string) (string, bool) {
	ok := true
	if len(v) > maxListLen {
		v, ok = v[:maxListLen], false
	}
	var out []string
	for s := range strings.SplitSeq(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		t, valid := parseToken(s)
		if !valid {
			ok = false
			continue
		}
		if len(out) == maxCORSEntries {
			ok = false
			break
		}
		out = appendNew(out, t)
	}
	return strings.Join(out, ", "), ok
}
