package gateway

import (
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"sluice.dev/sluice/internal/route"
)

// maxSubjectAltNames is the CRD's bound on validation.subjectAltNames;
// a manifests directory is not held to it, so Build is.
const maxSubjectAltNames = 5

// maxURI is the CRD's bound on an AbsoluteURI.
const maxURI = 253

// subjectAltNames checks a BackendTLSPolicy's validation.subjectAltNames,
// which the policy's namespace writes (untrusted), and returns them in the
// proxies' form: a lower-case DNS name (a leading "*." allowed, no IP
// address) for type Hostname, an absolute URI with a scheme and a host
// (a DNS name or an IP address) for type URI, without duplicates. msg,
// when not "", says why the policy cannot be met (and sans is nil).
func subjectAltNames(in []gatewayv1.SubjectAltName) (sans []route.SubjectAltName, msg string) {
	if len(in) > maxSubjectAltNames {
		return nil, fmt.Sprintf("validation.subjectAltNames has %d entries, at most %d are allowed", len(in), maxSubjectAltNames)
	}
	for i, s := range in {
		where := fmt.Sprintf("validation.subjectAltNames[%d]", i)
		var san route.SubjectAltName
		switch s.Type {
		case gatewayv1.HostnameSubjectAltNameType:
			if s.URI != "" {
				return nil, where + ": uri must not be set with type Hostname"
			}
			h := strings.ToLower(string(s.Hostname))
			if msg := checkSANHostname(h); msg != "" {
				return nil, fmt.Sprintf("%s.hostname %q %s", where, truncate(h, 253), msg)
			}
			san.Hostname = h
		case gatewayv1.URISubjectAltNameType:
			if s.Hostname != "" {
				return nil, where + ": hostname must not be set with type URI"
			}
			u, msg := checkSANURI(string(s.URI))
			if msg != "" {
				return nil, fmt.Sprintf("%s.uri %q %s", where, truncate(string(s.URI), maxURI), msg)
			}
			san.URI = u
		default:
			return nil, fmt.Sprintf("%s.type %q is not supported (Hostname or URI)", where, truncate(string(s.Type), 63))
		}
		if !slices.Contains(sans, san) {
			sans = append(sans, san)
		}
	}
	return sans, ""
}

// checkSANHostname says what is wrong with a lower-case Hostname SAN, ""
// when nothing is: a DNS name, its first label "*" or a name's.
func checkSANHostname(h string) string {
	if h == "" {
		return "is required with type Hostname"
	}
	name := strings.TrimPrefix(h, "*.")
	if _, err := netip.ParseAddr(name); err == nil {
		return "is an IP address, not a DNS name"
	}
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "is not a DNS name (an optional leading \"*.\" then lower-case labels of letters, digits and '-')"
	}
	return ""
}

// checkSANURI returns a URI SAN in the form the proxies compare with a
// certificate's (url.URL.String), or what is wrong with it: it must be
// printable ASCII of at most maxURI bytes, absolute (a scheme), and name
// a host (scheme://host...: a DNS name or an IP address).
func checkSANURI(s string) (string, string) {
	switch {
	case s == "":
		return "", "is required with type URI"
	case len(s) > maxURI:
		return "", fmt.Sprintf("is longer than %d bytes", maxURI)
	case strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r >= 0x7f }) >= 0:
		return "", "holds a space, a control or a non-ASCII character (percent-encode it)"
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", "is not a URI"
	}
	if u.Scheme == "" || u.Opaque != "" || !strings.HasPrefix(s[len(u.Scheme)+1:], "//") {
		return "", "is not an absolute URI with an authority (scheme://host/...)"
	}
	host := u.Hostname()
	if _, err := netip.ParseAddr(host); err != nil && len(validation.IsDNS1123Subdomain(strings.ToLower(host))) > 0 {
		return "", "does not name a host (a DNS name or an IP address)"
	}
	out := u.String()
	if v, err := url.Parse(out); err != nil || v.String() != out {
		return "", "does not keep its form when parsed again (percent-encode it plainly)"
	}
	return out, ""
}
