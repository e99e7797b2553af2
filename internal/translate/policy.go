package translate

import (
	"net/netip"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"sluice.dev/sluice/internal/route"
)

// Annotations of a route's request policies (route.Policies): source
// ranges and the body size here; CORS, rate limits and basic
// authentication in their own files. Every route of an Ingress shares its
// policies.
const (
	// AnnotationAllowSourceRange admits only clients whose address is in
	// one of these comma-separated CIDRs (or single addresses), IPv4 or
	// IPv6; others get 403. Invalid entries are reported and left out; a
	// list with no valid entry admits no one (fail closed).
	AnnotationAllowSourceRange = "sluice.dev/allow-source-range"
	// AnnotationDenySourceRange refuses clients in these CIDRs with 403;
	// it wins over the allow list.
	AnnotationDenySourceRange = "sluice.dev/deny-source-range"
	// AnnotationMaxBodySize is the largest request body accepted: bytes,
	// or a number with a unit k, m or g (powers of 1024, as nginx's
	// client_max_body_size); "0" means no limit. Larger bodies get 413.
	AnnotationMaxBodySize = "sluice.dev/max-body-size"
)

// Limits of the policy annotations.
const (
	// MaxSourceRanges bounds the entries of one source-range list.
	MaxSourceRanges = 1000
	// MaxBodySize is the largest max-body-size accepted (64 GiB).
	MaxBodySize = 64 << 30
	// DefaultMaxBodySize replaces an invalid max-body-size: nginx's
	// default, a limit rather than none (fail closed).
	DefaultMaxBodySize = 1 << 20
	// maxListLen bounds the length of a list annotation's value.
	maxListLen = 64 << 10
)

// ReasonAuthSecret is the Problem of an Ingress whose basic-authentication
// Secret is missing, in another namespace, or holds no usable user: its
// routes answer 503 (fail closed).
const ReasonAuthSecret = "AuthSecretUnusable"

// policies reads the request-policy annotations of ing, reports invalid
// ones, and remembers the result for the routes of ing (policiesOf); nil
// when ing sets none.
func (b *builder) policies(ing *networkingv1.Ingress, id string) {
	ann, _ := b.annotations(ing) // nginx.go: the nginx names translated
	var p route.Policies
	var errs []annotationError
	p.Access, errs = parseSourceAccess(ann, errs)
	p.BodyLimit, errs = parseBodyLimit(ann, errs)
	p.CORS, errs = parseCORS(ann, errs)
	p.RateLimit, errs = parseRateLimit(ann, errs)
	p.BasicAuth, errs = b.basicAuth(ing, errs)
	p.ForwardAuth, errs = b.forwardAuth(ing, errs)
	p.ErrorPages, errs = b.errorPages(ing, errs)
	for _, e := range errs {
		b.problem(ing, "InvalidAnnotation", "annotation "+e.key+": "+e.msg)
	}
	if p == (route.Policies{}) {
		return
	}
	if b.policiesOf == nil {
		b.policiesOf = make(map[string]*route.Policies)
	}
	b.policiesOf[id] = &p
}

func parseSourceAccess(ann map[string]string, errs []annotationError) (*route.SourceAccess, []annotationError) {
	allowV, allowSet := ann[AnnotationAllowSourceRange]
	denyV, denySet := ann[AnnotationDenySourceRange]
	if !allowSet && !denySet {
		return nil, errs
	}
	a := &route.SourceAccess{}
	if allowSet {
		var ok bool
		a.Allow, ok = parsePrefixes(allowV)
		if a.Allow == nil {
			a.Allow = []netip.Prefix{} // set, and empty: no one is admitted
		}
		switch {
		case len(a.Allow) == 0:
			errs = append(errs, annotationError{AnnotationAllowSourceRange, "has no valid CIDR (e.g. 10.0.0.0/8, 2001:db8::/32); no client is admitted"})
		case !ok:
			errs = append(errs, annotationError{AnnotationAllowSourceRange, "must be CIDRs or addresses separated by commas, at most 1000; invalid entries are left out"})
		}
	}
	if denySet {
		var ok bool
		a.Deny, ok = parsePrefixes(denyV)
		if !ok {
			errs = append(errs, annotationError{AnnotationDenySourceRange, "must be CIDRs or addresses separated by commas, at most 1000; invalid entries are left out"})
		}
	}
	if a.Allow == nil && len(a.Deny) == 0 {
		return nil, errs
	}
	return a, errs
}

// parsePrefixes parses a comma-separated list of CIDRs or addresses
// (IPv4-mapped IPv6 is unmapped, host bits are cleared). ok is false when
// some entry was invalid or the list too long; the valid entries are
// returned either way, in their order, without duplicates.
func parsePrefixes(v string) (out []netip.Prefix, ok bool) {
	ok = true
	if len(v) > maxListLen {
		v, ok = v[:maxListLen], false
	}
	for s := range strings.SplitSeq(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		pf, valid := parsePrefix(s)
		if !valid {
			ok = false
			continue
		}
		if len(out) == MaxSourceRanges {
			return out, false
		}
		dup := false
		for _, o := range out {
			dup = dup || o == pf
		}
		if !dup {
			out = append(out, pf)
		}
	}
	return out, ok
}

func parsePrefix(s string) (netip.Prefix, bool) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, false
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	pf, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	a := pf.Addr()
	bits := pf.Bits()
	if a.Is4In6() {
		if bits < 96 {
			return netip.Prefix{}, false
		}
		a, bits = a.Unmap(), bits-96
	}
	return netip.PrefixFrom(a, bits).Masked(), true
}

func parseBodyLimit(ann map[string]string, errs []annotationError) (*route.BodyLimit, []annotationError) {
	v, ok := ann[AnnotationMaxBodySize]
	if !ok {
		return nil, errs
	}
	n, valid := parseSize(v)
	if !valid {
		errs = append(errs, annotationError{AnnotationMaxBodySize, "must be bytes, or a number with unit k, m or g (e.g. 8m), up to 64g; using 1m"})
		n = DefaultMaxBodySize
	}
	if n == 0 {
		return nil, errs
	}
	return &route.BodyLimit{MaxBytes: n}, errs
}

// parseSize reads nginx's size syntax: a whole number of bytes, or with a
// unit k/K, m/M or g/G (powers of 1024), from 0 to MaxBodySize.
func parseSize(v string) (int64, bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 24 {
		return 0, false
	}
	shift := 0
	switch v[len(v)-1] {
	case 'k', 'K':
		shift = 10
	case 'm', 'M':
		shift = 20
	case 'g', 'G':
		shift = 30
	}
	if shift > 0 {
		v = v[:len(v)-1]
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > MaxBodySize>>shift {
		return 0, false
	}
	return int64(n) << shift, true
}
