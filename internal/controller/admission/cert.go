package admission

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// certs is the webhook's own small PKI: a self-signed CA and a serving
// certificate it signs. Both are renewed once two thirds of their life
// has passed (renew); the CA's PEM is what the webhook configuration
// carries as caBundle. Safe for concurrent use.
type certs struct {
	dir   string   // "" keeps them in memory only
	hosts []string // DNS names and IP addresses of the serving certificate
	now   func() time.Time

	mu     sync.Mutex
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
	leaf   *tls.Certificate
	expiry time.Time // the leaf's NotAfter
}

const (
	caLife   = 365 * 24 * time.Hour
	leafLife = 90 * 24 * time.Hour
)

// renew loads the certificates from dir or makes new ones when missing,
// unreadable or past two thirds of their life. It reports whether the CA
// changed (the webhook configuration needs the new caBundle).
func (c *certs) renew() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.ca == nil && c.dir != "" {
		c.load() // a bad or missing file just means new certificates
	}
	caChanged := false
	if c.ca == nil || stale(c.ca.NotBefore, c.ca.NotAfter, now) {
		if err := c.newCA(now); err != nil {
			return false, err
		}
		caChanged, c.leaf = true, nil
	}
	if c.leaf == nil || stale(c.expiry.Add(-leafLife), c.expiry, now) {
		if err := c.newLeaf(now); err != nil {
			return caChanged, err
		}
	}
	if c.dir != "" {
		if err := c.save(); err != nil {
			return caChanged, err
		}
	}
	return caChanged, nil
}

func stale(from, to, now time.Time) bool {
	return now.After(from.Add(to.Sub(from) * 2 / 3))
}

func (c *certs) newCA(now time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating the webhook CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "sluice-webhook-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caLife),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("signing the webhook CA: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return fmt.Errorf("parsing the webhook CA: %w", err)
	}
	c.ca, c.caKey, c.caPEM = ca, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return nil
}

func (c *certs) newLeaf(now time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating the webhook serving key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "sluice-webhook"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafLife),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range c.hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca, &key.PublicKey, c.caKey)
	if err != nil {
		return fmt.Errorf("signing the webhook serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding the webhook serving key: %w", err)
	}
	leaf, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		return fmt.Errorf("loading the webhook serving certificate: %w", err)
	}
	c.leaf, c.expiry = &leaf, tmpl.NotAfter
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

// Files in dir.
const (
	fileCA     = "ca.crt"
	fileCAKey  = "ca.key"
	fileTLS    = "tls.crt"
	fileTLSKey = "tls.key"
)

// load reads the CA and serving pair from dir; on any problem it leaves
// them unset.
func (c *certs) load() {
	read := func(name string) []byte {
		b, _ := os.ReadFile(filepath.Join(c.dir, name))
		return b
	}
	caPEM, caKeyPEM := read(fileCA), read(fileCAKey)
	caBlock, _ := pem.Decode(caPEM)
	keyBlock, _ := pem.Decode(caKeyPEM)
	if caBlock == nil || keyBlock == nil {
		return
	}
	ca, err1 := x509.ParseCertificate(caBlock.Bytes)
	key, err2 := x509.ParseECPrivateKey(keyBlock.Bytes)
	if err1 != nil || err2 != nil || !ca.IsCA {
		return
	}
	c.ca, c.caKey, c.caPEM = ca, key, caPEM
	leaf, err := tls.X509KeyPair(read(fileTLS), read(fileTLSKey))
	if err != nil || len(leaf.Certificate) == 0 {
		return
	}
	x, err := x509.ParseCertificate(leaf.Certificate[0])
	if err != nil || x.CheckSignatureFrom(ca) != nil || !sameHosts(x, c.hosts) {
		return
	}
	c.leaf, c.expiry = &leaf, x.NotAfter
}

func sameHosts(x *x509.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if x.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// save writes the CA and serving pair to dir (keys mode 0600).
func (c *certs) save() error {
	keyDER, err := x509.MarshalECPrivateKey(c.caKey)
	if err != nil {
		return fmt.Errorf("encoding the webhook CA key: %w", err)
	}
	leafKey, ok := c.leaf.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return errors.New("saving webhook certificates: unexpected key type")
	}
	leafKeyDER, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		return fmt.Errorf("encoding the webhook serving key: %w", err)
	}
	var chain bytes.Buffer
	for _, der := range c.leaf.Certificate {
		_ = pem.Encode(&chain, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("saving webhook certificates: %w", err)
	}
	for name, data := range map[string][]byte{
		fileCA: c.caPEM, fileCAKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		fileTLS: chain.Bytes(), fileTLSKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: leafKeyDER}),
	} {
		if err := os.WriteFile(filepath.Join(c.dir, name), data, 0o600); err != nil {
			return fmt.Errorf("saving webhook certificates: %w", err)
		}
	}
	return nil
}

// bundle returns the CA in PEM (the caBundle).
func (c *certs) bundle() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.caPEM)
}

// getCertificate serves the current leaf (tls.Config.GetCertificate).
func (c *certs) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leaf == nil {
		return nil, errors.New("no webhook serving certificate yet")
	}
	return c.leaf, nil
}
