package translate

import (
	"strconv"
	"strings"

	"sluice.dev/sluice/internal/route"
)

// Annotations of rate limits per client address (route.RateLimit). The
// limits hold in each proxy replica separately (as in ingress-nginx): with
// N replicas behind a load balancer a client may get up to N times the
// rate. All routes of an Ingress share its limits.
const (
	// AnnotationLimitRPS: requests per second per client address.
	AnnotationLimitRPS = "sluice.dev/limit-rps"
	// AnnotationLimitRPM: requests per minute per client address.
	AnnotationLimitRPM = "sluice.dev/limit-rpm"
	// AnnotationLimitBurst: requests a client may send at once (the
	// bucket size) under limit-rps, or under limit-rpm when only that is
	// set; default the rate (one second's, or one minute's, worth).
	AnnotationLimitBurst = "sluice.dev/limit-burst"
	// AnnotationLimitConnections: requests in flight per client address.
	AnnotationLimitConnections = "sluice.dev/limit-connections"
	// AnnotationLimitExemptSourceRange: CIDRs never limited.
	AnnotationLimitExemptSourceRange = "sluice.dev/limit-exempt-source-range"
	// AnnotationLimitStatus: the status of a limited request, 400 to 599;
	// default DefaultLimitStatus.
	AnnotationLimitStatus = "sluice.dev/limit-status"
)

// DefaultLimitStatus answers limited requests: 429 Too Many Requests (RFC
// 6585) tells the client that it, not the service, is the cause, and
// load balancers do not take it for an unhealthy target. ingress-nginx's
// default is 503; its compatibility mapping keeps that.
const DefaultLimitStatus = 429

// MaxLimit bounds the rate and burst values.
const MaxLimit = 1_000_000

func parseRateLimit(ann map[string]string, errs []annotationError) (*route.RateLimit, []annotationError) {
	fail := func(key, msg string) { errs = append(errs, annotationError{key, msg}) }
	l := &route.RateLimit{Status: DefaultLimitStatus}
	count := func(key string) int {
		v, ok := ann[key]
		if !ok {
			return 0
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n > MaxLimit {
			fail(key, "must be a whole number from 0 to 1000000; no limit")
			return 0
		}
		return n
	}
	l.RPS = count(AnnotationLimitRPS)
	l.RPM = count(AnnotationLimitRPM)
	l.Concurrent = count(AnnotationLimitConnections)
	burst := count(AnnotationLimitBurst)
	on := l.RPS > 0 || l.RPM > 0 || l.Concurrent > 0
	if !on {
		for _, k := range []string{AnnotationLimitBurst, AnnotationLimitExemptSourceRange, AnnotationLimitStatus} {
			if _, ok := ann[k]; ok {
				fail(k, "has no effect without "+AnnotationLimitRPS+", "+AnnotationLimitRPM+" or "+AnnotationLimitConnections)
			}
		}
		return nil, errs
	}
	l.BurstRPS, l.BurstRPM = l.RPS, l.RPM
	if burst > 0 {
		switch {
		case l.RPS > 0:
			l.BurstRPS = burst
		case l.RPM > 0:
			l.BurstRPM = burst
		default:
			fail(AnnotationLimitBurst, "has no effect without "+AnnotationLimitRPS+" or "+AnnotationLimitRPM)
		}
	}
	if v, ok := ann[AnnotationLimitExemptSourceRange]; ok {
		var valid bool
		l.Exempt, valid = parsePrefixes(v)
		if !valid {
			fail(AnnotationLimitExemptSourceRange, "must be CIDRs or addresses separated by commas, at most 1000; invalid entries are left out")
		}
	}
	if v, ok := ann[AnnotationLimitStatus]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 400 || n > 599 {
			fail(AnnotationLimitStatus, "must be a status from 400 to 599; using 429")
		} else {
			l.Status = n
		}
	}
	return l, errs
}
