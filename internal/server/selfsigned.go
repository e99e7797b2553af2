package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"time"
)

// SelfSignedName is the common name (and only DNS name) of the certificate
// SelfSigned makes; no client trusts it, and it names no real host.
const SelfSignedName = "sluice-default.invalid"

// SelfSigned makes the fallback certificate of the HTTPS listener: a new
// ECDSA P-256 key and a self-signed certificate for SelfSignedName, valid
// from an hour before now for ten years. It is served when no certificate
// matches a client's server name and no usable default certificate was
// configured, so the handshake completes (an ACME HTTP-01 challenge can
// then be answered, and the client gets a certificate error, not a reset),
// as ingress-nginx and Traefik do with their generated certificates.
func SelfSigned(now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the default certificate's key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generating the default certificate's serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: SelfSignedName, Organization: []string{"sluice"}},
		DNSNames:              []string{SelfSignedName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing the default certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the default certificate: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}
