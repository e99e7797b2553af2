package translate

import (
	"strconv"
	"strings"
	"time"
)

// Annotations of the HTTPS behaviour of an Ingress's routes.
const (
	// AnnotationSSLRedirect: "true" answers plain-HTTP requests to the
	// Ingress's hosts that have TLS (from their owner's spec.tls) with a
	// 308 to HTTPS; "false" serves them. Default Options.SSLRedirect
	// (the proxy's --ssl-redirect, false), because the Ingress
	// conformance suite expects plain HTTP to a spec.tls host to be served.
	AnnotationSSLRedirect = "sluice.dev/ssl-redirect"
	// AnnotationHSTSMaxAge enables Strict-Transport-Security on HTTPS
	// responses: whole seconds (or a Go duration) up to MaxHSTSMaxAge.
	AnnotationHSTSMaxAge = "sluice.dev/hsts-max-age"
	// AnnotationHSTSIncludeSubdomains adds includeSubDomains: "true" or
	// "false" (default).
	AnnotationHSTSIncludeSubdomains = "sluice.dev/hsts-include-subdomains"
	// AnnotationHSTSPreload adds preload: "true" or "false" (default). It
	// needs includeSubDomains and a max-age of at least a year, as the
	// browsers' preload lists do.
	AnnotationHSTSPreload = "sluice.dev/hsts-preload"
)

// Limits of the HSTS annotations.
const (
	// MaxHSTSMaxAge is the longest HSTS max-age accepted (two years).
	MaxHSTSMaxAge = 2 * 365 * 24 * time.Hour
	// minPreloadMaxAge is the shortest max-age preload lists accept.
	minPreloadMaxAge = 365 * 24 * time.Hour
)

// httpsPolicy is what an Ingress asks of its routes' HTTPS behaviour.
type httpsPolicy struct {
	// redirect is wanted; it applies only to hosts that have TLS.
	redirect bool
	// hsts is the Strict-Transport-Security value, "" for none.
	hsts string
}

// parseHTTPS reads the redirect and HSTS annotations; redirect is the
// redirect's default. Invalid values are reported and replaced by their
// default.
func parseHTTPS(ann map[string]string, redirect bool) (httpsPolicy, []annotationError) {
	hp := httpsPolicy{redirect: redirect}
	var errs []annotationError
	fail := func(key, msg string) { errs = append(errs, annotationError{key, msg}) }

	if v, ok := ann[AnnotationSSLRedirect]; ok {
		b, valid := parseBool(v)
		if !valid {
			fail(AnnotationSSLRedirect, `must be "true" or "false"; using the default (`+strconv.FormatBool(redirect)+`)`)
			b = redirect
		}
		hp.redirect = b
	}

	v, on := ann[AnnotationHSTSMaxAge]
	var maxAge time.Duration
	if on {
		d, valid := parseDuration(v, MaxHSTSMaxAge)
		if !valid || d%time.Second != 0 {
			fail(AnnotationHSTSMaxAge, "must be whole seconds (e.g. 31536000 or 8760h) up to 17520h; no HSTS")
			on = false
		}
		maxAge = d
	}
	flag := func(key string) bool {
		v, ok := ann[key]
		if !ok {
			return false
		}
		b, valid := parseBool(v)
		switch {
		case !valid:
			fail(key, `must be "true" or "false"; using false`)
		case !on && b:
			fail(key, "has no effect without a valid "+AnnotationHSTSMaxAge)
		}
		return valid && b
	}
	sub := flag(AnnotationHSTSIncludeSubdomains)
	preload := flag(AnnotationHSTSPreload)
	if !on {
		return hp, errs
	}
	if preload && (!sub || maxAge < minPreloadMaxAge) {
		fail(AnnotationHSTSPreload, "needs "+AnnotationHSTSIncludeSubdomains+": \"true\" and a max-age of at least 31536000; preload left out")
		preload = false
	}
	hp.hsts = "max-age=" + strconv.FormatInt(int64(maxAge/time.Second), 10)
	if sub {
		hp.hsts += "; includeSubDomains"
	}
	if preload {
		hp.hsts += "; preload"
	}
	return hp, errs
}

// parseBool accepts "true" and "false", the values Kubernetes annotations
// use, with surrounding space.
func parseBool(v string) (b, ok bool) {
	switch strings.TrimSpace(v) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}
