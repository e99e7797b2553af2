package dns

import (
	"fmt"
	"slices"
	"strings"
)

// NamespaceDomains says which hosts the Ingresses of each namespace may
// publish (--dns-namespace-domains): namespace → patterns. A pattern is a
// name ("a.example.com": that name only) or "*." and a name
// ("*.a.example.com": every name below a.example.com, wildcard hosts
// included). Nil: every namespace may publish every host in the managed
// zones. Not nil: a namespace it does not list may publish nothing.
type NamespaceDomains map[string][]string

// maxFlagValue bounds one --dns-namespace-domains value.
const maxFlagValue = 64 << 10

// ParseNamespaceDomains parses one --dns-namespace-domains value,
// "NAMESPACE=PATTERN[,PATTERN...]" (the flag repeats, one namespace each
// time), into the namespace and its patterns, lower case.
func ParseNamespaceDomains(v string) (string, []string, error) {
	if len(v) > maxFlagValue {
		return "", nil, fmt.Errorf("parsing namespace domains: value of %d bytes is too long", len(v))
	}
	ns, list, ok := strings.Cut(v, "=")
	if !ok {
		return "", nil, fmt.Errorf("parsing namespace domains %q: want NAMESPACE=DOMAIN[,DOMAIN...]", trim(v))
	}
	if !isLabel(ns) {
		return "", nil, fmt.Errorf("parsing namespace domains %q: %q is not a namespace name", trim(v), trim(ns))
	}
	var out []string
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(p)), ".")
		if !validPattern(p) {
			return "", nil, fmt.Errorf("parsing namespace domains %q: %q is neither a domain name nor *. and a domain name", trim(v), trim(p))
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return ns, out, nil
}

// Add puts the patterns of one flag value into d (a namespace named
// twice gets the patterns of both).
func (d NamespaceDomains) Add(ns string, patterns []string) {
	for _, p := range patterns {
		if !slices.Contains(d[ns], p) {
			d[ns] = append(d[ns], p)
		}
	}
}

// Allows reports whether an Ingress in namespace ns may publish host
// (lower case, no trailing dot; "*.x" allowed).
func (d NamespaceDomains) Allows(ns, host string) bool {
	if d == nil {
		return true
	}
	for _, p := range d[ns] {
		if rest, ok := strings.CutPrefix(p, "*."); ok {
			if strings.HasSuffix(host, "."+rest) {
				return true
			}
		} else if host == p {
			return true
		}
	}
	return false
}

// validPattern: a domain name of at least two labels, optionally behind
// "*.".
func validPattern(p string) bool {
	p = strings.TrimPrefix(p, "*.")
	if len(p) > 253 || !strings.Contains(p, ".") {
		return false
	}
	for _, l := range strings.Split(p, ".") {
		if !isLabel(l) {
			return false
		}
	}
	return true
}

// isLabel: an RFC 1123 label (a Kubernetes namespace name, a host
// label): 1 to 63 of a-z, 0-9 and '-', not starting or ending with '-'.
func isLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}
