package managed

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Certificate rules.
const (
	// MaxCertificates is how many certificates one listener gets (the
	// default one included); hosts beyond are reported.
	MaxCertificates = 25
	// MinValidity is how long a certificate must still be valid to be
	// chosen: an expiring one gives way to its renewal.
	MinValidity = 7 * 24 * time.Hour
)

// Cert is an ACM certificate as listed.
type Cert struct {
	ARN                 string
	Names               []string // domain name and subject alternative names
	Status              string
	NotBefore, NotAfter time.Time
}

// Selection is the outcome of Select.
type Selection struct {
	// Certificates to attach, the default first. Deterministic for the
	// same input.
	Certificates []string
	// Uncovered are hosts no usable certificate covers.
	Uncovered []string
	// Excess are hosts whose certificate did not fit in MaxCertificates.
	Excess []string
}

// Covers reports whether a certificate name covers a host: equal (case
// insensitive), or the name is a wildcard "*.rest" and the host is exactly
// one non-empty label more ("a.rest", not "rest" nor "a.b.rest"). A
// wildcard host ("*.rest", as Ingresses allow) is covered only by the
// same wildcard name.
func Covers(name, host string) bool {
	name, host = strings.ToLower(strings.TrimRight(name, ".")), strings.ToLower(strings.TrimRight(host, "."))
	if name == "" || host == "" {
		return false
	}
	if name == host {
		return true
	}
	rest, ok := strings.CutPrefix(name, "*.")
	if !ok || rest == "" || strings.Contains(rest, "*") {
		return false
	}
	label, after, ok := strings.Cut(host, ".")
	return ok && label != "" && !strings.Contains(label, "*") && after == rest
}

// score ranks how well a certificate name matches a host: 2 exact, 1
// wildcard, 0 not at all.
func score(name, host string) int {
	switch {
	case !Covers(name, host):
		return 0
	case strings.EqualFold(strings.TrimRight(name, "."), strings.TrimRight(host, ".")):
		return 2
	default:
		return 1
	}
}

// usable: issued, already valid and valid for at least MinValidity more.
func usable(c Cert, now time.Time) bool {
	return c.Status == "ISSUED" && !now.Before(c.NotBefore) && !c.NotAfter.Before(now.Add(MinValidity))
}

// Select chooses the certificates for hosts: per host, the usable
// certificate with the best match (exact over wildcard), then the latest
// expiry, then the smallest ARN. The certificates chosen are ordered by how
// many hosts they cover (most first), then ARN; the first is the default,
// except that keep (the listener's current default, "" for none) stays
// first while it is chosen, so that adding a host never moves the default.
// Beyond MaxCertificates, the hosts left without a kept certificate are
// Excess.
func Select(hosts []string, certs []Cert, now time.Time, keep string) Selection {
	var ok []Cert
	for _, c := range certs {
		if usable(c, now) {
			ok = append(ok, c)
		}
	}
	hs := normalizeHosts(hosts)
	best := func(host string, among []Cert) (string, int) {
		var pick *Cert
		bestScore := 0
		for i := range among {
			c := &among[i]
			s := 0
			for _, n := range c.Names {
				s = max(s, score(n, host))
			}
			if s == 0 {
				continue
			}
			if pick == nil || s > bestScore ||
				s == bestScore && (c.NotAfter.After(pick.NotAfter) || c.NotAfter.Equal(pick.NotAfter) && c.ARN < pick.ARN) {
				pick, bestScore = c, s
			}
		}
		if pick == nil {
			return "", 0
		}
		return pick.ARN, bestScore
	}
	var sel Selection
	chosen := map[string]int{} // ARN → hosts
	for _, h := range hs {
		arn, _ := best(h, ok)
		if arn == "" {
			sel.Uncovered = append(sel.Uncovered, h)
			continue
		}
		chosen[arn]++
	}
	arns := make([]string, 0, len(chosen))
	for a := range chosen {
		arns = append(arns, a)
	}
	slices.SortFunc(arns, func(a, b string) int {
		return cmp.Or(boolRank(b == keep, a == keep), cmp.Compare(chosen[b], chosen[a]), cmp.Compare(a, b))
	})
	if len(arns) > MaxCertificates {
		kept := arns[:MaxCertificates]
		var keptCerts []Cert
		for _, c := range ok {
			if slices.Contains(kept, c.ARN) {
				keptCerts = append(keptCerts, c)
			}
		}
		for _, h := range hs {
			if slices.Contains(sel.Uncovered, h) {
				continue
			}
			if a, _ := best(h, keptCerts); a == "" {
				sel.Excess = append(sel.Excess, h)
			}
		}
		arns = kept
	}
	sel.Certificates = arns
	return sel
}

// normalizeHosts lowercases, drops empty and duplicate hosts, and sorts.
func normalizeHosts(hosts []string) []string {
	var out []string
	for _, h := range hosts {
		h = strings.ToLower(strings.TrimRight(strings.TrimSpace(h), "."))
		if h != "" && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// boolRank orders true before false (for a descending sort key).
func boolRank(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}
