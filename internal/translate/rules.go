package translate

import (
	"net"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"sluice.dev/sluice/internal/route"
)

// Names of the IngressClass selection annotations.
const (
	annotationIngressClass = "kubernetes.io/ingress.class"
	annotationDefaultClass = "ingressclass.kubernetes.io/is-default-class"
)

// ClassFilter decides which Ingresses sluice serves. The proxy (Build) and
// the controller's Ingress status use the same one.
type ClassFilter struct {
	ours         map[string]bool // IngressClass names that are ours
	serveNoClass bool
	// nginx are the ingress-nginx classes among ours (nginx.go), nil
	// without compatibility; nginxDefault: one of them is the default.
	nginx        map[string]bool
	nginxDefault bool
}

// NewClassFilter returns the filter for the given IngressClasses and options
// (IngressClasses, else IngressClass and ControllerName; empty ones take
// their defaults).
func NewClassFilter(classes []*networkingv1.IngressClass, opts Options) ClassFilter {
	opts = opts.withDefaults()
	f := ClassFilter{ours: namedClasses(opts)}
	for _, c := range classes {
		if c == nil {
			continue
		}
		if f.ours[c.Name] || ownsController(opts, c) {
			f.ours[c.Name] = true
			if c.Annotations[annotationDefaultClass] == "true" {
				f.serveNoClass = true
			}
		}
	}
	f.addNginxClasses(classes, opts)
	return f
}

// Serves reports whether ing is ours: spec.ingressClassName, else the legacy
// annotation, names one of our classes (Options.IngressClasses, or our
// class and those of our controller); an Ingress with neither is ours only
// when one of our classes is the cluster default.
func (f ClassFilter) Serves(ing *networkingv1.Ingress) bool {
	if ing.Spec.IngressClassName != nil {
		return f.ours[*ing.Spec.IngressClassName]
	}
	if v, ok := ing.Annotations[annotationIngressClass]; ok {
		return f.ours[v]
	}
	return f.serveNoClass
}

// checkHost lower-cases h and validates it as an Ingress rule or TLS host: a
// DNS-1123 subdomain, or "*." followed by one; never an IP address. "" (all
// hosts) is valid. The message is "" when h is valid.
func checkHost(h string) (string, string) {
	h = strings.ToLower(h)
	if h == "" {
		return "", ""
	}
	if isIPLike(h) {
		return h, "must be a DNS name, not an IP address"
	}
	if wellFormedHost(h) {
		return h, "" // the common case, without the regular expressions below
	}
	var errs []string
	if strings.Contains(h, "*") {
		errs = validation.IsWildcardDNS1123Subdomain(h)
	} else {
		errs = validation.IsDNS1123Subdomain(h)
	}
	if len(errs) > 0 {
		return h, "must be a DNS-1123 subdomain or a wildcard such as *.example.com"
	}
	return h, ""
}

// wellFormedHost accepts (lower-case) DNS-1123 subdomains and wildcards
// such as *.example.com, as validation.IsDNS1123Subdomain and
// IsWildcardDNS1123Subdomain do; what it refuses, checkHost asks them.
func wellFormedHost(h string) bool {
	return len(h) <= validation.DNS1123SubdomainMaxLength && isDNS1123Subdomain(strings.TrimPrefix(h, "*."))
}

// isDNS1123Subdomain is validation.IsDNS1123Subdomain without its regular
// expression (a tenth of a rebuild's CPU with 10,000 Ingresses): at most
// 253 characters, dot-separated labels of lower-case letters, digits and
// hyphens, each starting and ending with a letter or digit. Like the
// original it does not bound a label's length. FuzzHostCheck holds the two
// to the same answers.
func isDNS1123Subdomain(h string) bool {
	if h == "" || len(h) > validation.DNS1123SubdomainMaxLength {
		return false
	}
	start := 0 // of the current label
	for i := 0; i <= len(h); i++ {
		if i == len(h) || h[i] == '.' {
			if i == start || h[start] == '-' || h[i-1] == '-' {
				return false // empty label, or a hyphen at an end
			}
			start = i + 1
			continue
		}
		if c := h[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// isIPLike reports an IP literal, including the sloppy IPv4 forms (leading
// zeros) the API server also rejects.
func isIPLike(h string) bool {
	if !strings.ContainsRune(h, ':') && strings.Trim(h, "0123456789.") != "" {
		return false // the common case, a name: without allocating
	}
	if net.ParseIP(h) != nil {
		return true
	}
	parts := strings.Split(h, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// Path sequences the API server rejects in Exact and Prefix paths.
var (
	invalidPathSequences = []string{"//", "/./", "/../", "%2f", "%2F"}
	invalidPathSuffixes  = []string{"/..", "/."}
)

// checkPath validates one HTTPIngressPath as the API server does and returns
// the route path type and path. ImplementationSpecific is Prefix; its path
// may be empty, which means "/". The message is "" when p is valid.
func checkPath(p *networkingv1.HTTPIngressPath) (route.PathType, string, string) {
	if p.PathType == nil {
		return 0, "", "pathType is required"
	}
	switch *p.PathType {
	case networkingv1.PathTypeExact, networkingv1.PathTypePrefix:
		if !strings.HasPrefix(p.Path, "/") {
			return 0, "", "path must begin with '/'"
		}
		for _, s := range invalidPathSequences {
			if strings.Contains(p.Path, s) {
				return 0, "", "path must not contain '" + s + "'"
			}
		}
		for _, s := range invalidPathSuffixes {
			if strings.HasSuffix(p.Path, s) {
				return 0, "", "path must not end with '" + s + "'"
			}
		}
		if *p.PathType == networkingv1.PathTypeExact {
			return route.PathExact, p.Path, ""
		}
		return route.PathPrefix, p.Path, ""
	case networkingv1.PathTypeImplementationSpecific:
		if p.Path == "" {
			return route.PathPrefix, "/", ""
		}
		if !strings.HasPrefix(p.Path, "/") {
			return 0, "", "path must begin with '/'"
		}
		return route.PathPrefix, p.Path, ""
	}
	return 0, "", `pathType must be "Exact", "Prefix" or "ImplementationSpecific"`
}

// matchKey is what two routes of one host must not share: route.New keys
// Prefix routes by their path without trailing slashes, so "/foo" and
// "/foo/" are the same rule.
func matchKey(t route.PathType, path string) string {
	if t == route.PathPrefix {
		return "P" + strings.TrimRight(path, "/")
	}
	return "E" + path
}
