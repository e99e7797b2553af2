package translate

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"sluice.dev/sluice/internal/route"
)

// Ingress annotations sluice reads. Each has its own typed parser below; a
// value never reaches anything but that parser, and problems never quote it.
const (
	// AnnotationLoadBalance selects the balancing algorithm:
	// "least-request" (default) or "round-robin".
	AnnotationLoadBalance = "sluice.dev/load-balance"
	// AnnotationHashByHeader names a request header whose value is hashed
	// onto a consistent-hash ring (route.HeaderHash). It overrides
	// AnnotationLoadBalance.
	AnnotationHashByHeader = "sluice.dev/hash-by-header"
	// AnnotationAffinity enables sticky sessions; the only value is "cookie".
	AnnotationAffinity = "sluice.dev/affinity"
	// AnnotationAffinityCookieName is the affinity cookie's name; default
	// DefaultAffinityCookieName.
	AnnotationAffinityCookieName = "sluice.dev/affinity-cookie-name"
	// AnnotationAffinityCookieMaxAge is the affinity cookie's Max-Age, a Go
	// duration or a number of seconds; default 0, a session cookie.
	AnnotationAffinityCookieMaxAge = "sluice.dev/affinity-cookie-max-age"
	// AnnotationRetries is the number of retries, 0 to MaxRetries; default
	// the proxy's.
	AnnotationRetries = "sluice.dev/retries"
	// AnnotationConnectTimeout and AnnotationResponseTimeout override the
	// proxy's timeouts; Go durations or seconds, at most MaxTimeout.
	AnnotationConnectTimeout  = "sluice.dev/connect-timeout"
	AnnotationResponseTimeout = "sluice.dev/response-timeout"
	// AnnotationProxyReadTimeout bounds the wait between two successive
	// reads of the upstream's response body, AnnotationProxySendTimeout
	// the wait between two successive writes of the request upstream
	// (nginx's proxy_read_timeout and proxy_send_timeout; the whole
	// response or request may take longer). Go durations or seconds, at
	// most MaxTimeout; default none. A read timeout aborts the client's
	// response; a send timeout answers 504.
	AnnotationProxyReadTimeout = "sluice.dev/proxy-read-timeout"
	AnnotationProxySendTimeout = "sluice.dev/proxy-send-timeout"
)

// Limits of annotation values.
const (
	DefaultAffinityCookieName = "sluice-affinity"
	MaxRetries                = 5
	MaxTimeout                = time.Hour
	// MaxCookieMaxAge is the longest affinity cookie lifetime (one year).
	MaxCookieMaxAge = 365 * 24 * time.Hour
	// maxTokenLen bounds header and cookie names.
	maxTokenLen = 128
)

// annotationError is one rejected annotation. msg says what a valid value
// looks like and what is used instead; it never contains the value.
type annotationError struct {
	key string
	msg string
}

// parsePolicy reads the balancing and retry annotations of one Ingress.
// Invalid values are reported and replaced by their default; the returned
// Policy is always valid.
func parsePolicy(ann map[string]string) (route.Policy, []annotationError) {
	p := route.Policy{Retries: -1}
	var errs []annotationError
	fail := func(key, msg string) { errs = append(errs, annotationError{key, msg}) }

	lb, lbSet := ann[AnnotationLoadBalance]
	if lbSet {
		alg, ok := parseAlgorithm(lb)
		if !ok {
			fail(AnnotationLoadBalance, `must be "least-request" or "round-robin"; using least-request`)
		}
		p.Algorithm = alg
	}
	if v, ok := ann[AnnotationHashByHeader]; ok {
		h, ok := parseToken(v)
		switch {
		case !ok:
			fail(AnnotationHashByHeader, "must be an HTTP header name; header hashing is off")
		default:
			if lbSet {
				fail(AnnotationLoadBalance, "ignored because "+AnnotationHashByHeader+" is set")
			}
			p.Algorithm = route.HeaderHash
			p.HashHeader = http.CanonicalHeaderKey(h)
		}
	}

	p.Affinity, errs = parseAffinity(ann, errs)

	if v, ok := ann[AnnotationRetries]; ok {
		n, ok := parseRetries(v)
		if !ok {
			fail(AnnotationRetries, "must be an integer from 0 to 5; using the proxy default")
		}
		p.Retries = n
	}
	for _, t := range []struct {
		key string
		dst *time.Duration
	}{
		{AnnotationConnectTimeout, &p.ConnectTimeout},
		{AnnotationResponseTimeout, &p.ResponseTimeout},
		{AnnotationProxyReadTimeout, &p.ReadTimeout},
		{AnnotationProxySendTimeout, &p.SendTimeout},
	} {
		if v, ok := ann[t.key]; ok {
			d, ok := parseDuration(v, MaxTimeout)
			if !ok {
				fail(t.key, "must be a duration (e.g. 5s) or seconds from 0 to 1h; using the proxy default")
			}
			*t.dst = d
		}
	}
	return p, errs
}

// parseAffinity reads the affinity annotations; cookie name and max-age
// without affinity "cookie" are reported as having no effect.
func parseAffinity(ann map[string]string, errs []annotationError) (*route.CookieAffinity, []annotationError) {
	v, set := ann[AnnotationAffinity]
	on := false
	if set {
		if strings.TrimSpace(v) == "cookie" {
			on = true
		} else {
			errs = append(errs, annotationError{AnnotationAffinity, `must be "cookie"; affinity is off`})
		}
	}
	a := &route.CookieAffinity{Name: DefaultAffinityCookieName}
	if v, ok := ann[AnnotationAffinityCookieName]; ok {
		name, valid := parseToken(v)
		switch {
		case !on:
			errs = append(errs, annotationError{AnnotationAffinityCookieName, "has no effect without " + AnnotationAffinity + ": cookie"})
		case !valid:
			errs = append(errs, annotationError{AnnotationAffinityCookieName, "must be a cookie name (token characters); using " + DefaultAffinityCookieName})
		default:
			a.Name = name
		}
	}
	if v, ok := ann[AnnotationAffinityCookieMaxAge]; ok {
		d, valid := parseDuration(v, MaxCookieMaxAge)
		if valid && d%time.Second != 0 {
			valid, d = false, 0
		}
		switch {
		case !on:
			errs = append(errs, annotationError{AnnotationAffinityCookieMaxAge, "has no effect without " + AnnotationAffinity + ": cookie"})
		case !valid:
			errs = append(errs, annotationError{AnnotationAffinityCookieMaxAge, "must be whole seconds (e.g. 3600 or 1h) up to 8760h; using a session cookie"})
		default:
			a.MaxAge = d
		}
	}
	if !on {
		return nil, errs
	}
	return a, errs
}

func parseAlgorithm(v string) (route.Algorithm, bool) {
	switch strings.TrimSpace(v) {
	case "least-request":
		return route.LeastRequest, true
	case "round-robin":
		return route.RoundRobin, true
	}
	return route.LeastRequest, false
}

// parseToken accepts an RFC 9110 token (header names and cookie names share
// the grammar) of at most maxTokenLen bytes.
func parseToken(v string) (string, bool) {
	v = strings.TrimSpace(v)
	if len(v) > maxTokenLen || !httpguts.ValidHeaderFieldName(v) {
		return "", false
	}
	return v, true
}

func parseRetries(v string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 || n > MaxRetries {
		return -1, false
	}
	return n, true
}

// parseDuration accepts a Go duration ("90s", "1m30s") or a whole number of
// seconds ("90"), from 0 to max.
func parseDuration(v string, max time.Duration) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 32 {
		return 0, false
	}
	var d time.Duration
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		if time.Duration(n) > max/time.Second {
			return 0, false
		}
		d = time.Duration(n) * time.Second
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, false
		}
	}
	if d < 0 || d > max {
		return 0, false
	}
	return d, true
}
