package route

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
)

// SubjectAltName is one name an upstream certificate may be verified
// against (a BackendTLSPolicy's validation.subjectAltNames). Exactly one
// field is set.
type SubjectAltName struct {
	// Hostname, lower case, matches a DNS name SAN of the certificate:
	// equal, or one label under a wildcard on either side ("*.example.com"
	// in the certificate matches "a.example.com", and the other way round).
	Hostname string
	// URI matches a URI SAN of the certificate that is equal as a string
	// (as url.URL.String gives it: a SPIFFE ID, for instance).
	URI string
}

func (s SubjectAltName) String() string {
	if s.URI != "" {
		return "uri:" + s.URI
	}
	return "dns:" + s.Hostname
}

// ErrSubjectAltName is the error of a certificate that carries none of the
// SubjectAltNames asked for.
var ErrSubjectAltName = errors.New("the certificate carries none of the subjectAltNames")

// Key is the comparable form of t's verification: two configurations with
// one Key verify alike ("" for nil).
func (t *UpstreamTLS) Key() string {
	if t == nil {
		return ""
	}
	skip := "verify"
	if t.InsecureSkipVerify {
		skip = "skip"
	}
	k := t.ServerName + "\x00" + skip + "\x00" + string(t.CA)
	for _, s := range t.SubjectAltNames {
		k += "\x00" + s.String()
	}
	return k
}

// VerifyConnection returns, for a tls.Config whose InsecureSkipVerify is
// set so that crypto/tls does not check the certificate against
// ServerName, a VerifyConnection that does what it left out: the chain to
// roots (nil: the system roots), and at least one of t.SubjectAltNames in
// the leaf certificate.
func (t *UpstreamTLS) VerifyConnection(roots *x509.CertPool) func(tls.ConnectionState) error {
	sans := t.SubjectAltNames
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("verifying the upstream certificate: none was presented")
		}
		leaf := cs.PeerCertificates[0]
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		opts := x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		if _, err := leaf.Verify(opts); err != nil {
			return fmt.Errorf("verifying the upstream certificate: %w", err)
		}
		if !MatchSubjectAltNames(leaf, sans) {
			return fmt.Errorf("verifying the upstream certificate (DNS %v, URI %v): %w", leaf.DNSNames, leaf.URIs, ErrSubjectAltName)
		}
		return nil
	}
}

// MatchSubjectAltNames reports whether cert carries at least one of sans:
// a DNS name SAN for a Hostname, a URI SAN for a URI. The subject's
// common name never counts.
func MatchSubjectAltNames(cert *x509.Certificate, sans []SubjectAltName) bool {
	for _, s := range sans {
		switch {
		case s.URI != "":
			for _, u := range cert.URIs {
				if u != nil && u.String() == s.URI {
					return true
				}
			}
		case s.Hostname != "":
			for _, n := range cert.DNSNames {
				if dnsNameMatch(strings.ToLower(n), s.Hostname) {
					return true
				}
			}
		}
	}
	return false
}

// dnsNameMatch reports whether a certificate's DNS name matches a wanted
// one: equal, or a wildcard on one side standing for exactly one
// non-empty label of the other.
func dnsNameMatch(have, want string) bool {
	if have == want {
		return true
	}
	wild, name := have, want
	if strings.HasPrefix(want, "*.") {
		wild, name = want, have
	}
	if !strings.HasPrefix(wild, "*.") || strings.HasPrefix(name, "*.") {
		return false
	}
	label, rest, ok := strings.Cut(name, ".")
	return ok && label != "" && rest != "" && rest == wild[2:]
}
