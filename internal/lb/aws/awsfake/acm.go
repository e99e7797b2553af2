package awsfake

import (
	"cmp"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file is the fake's AWS Certificate Manager: the JSON 1.1 protocol
// (POST / with X-Amz-Target: CertificateManager.<Operation>) for
// ListCertificates and DescribeCertificate, and AddCertificate for tests
// to seed certificates.
//
//	controller ─► acm (aws-sdk-go-v2) ─HTTP JSON 1.1─► awsfake ─► certificates

const acmTargetPrefix = "CertificateManager."

// Certificate describes an ACM certificate to seed.
type Certificate struct {
	// Domain is the certificate's DomainName. Required.
	Domain string
	// SANs are its other names (the Domain is added when missing, as ACM
	// lists it).
	SANs []string
	// Status: ISSUED (default), PENDING_VALIDATION, EXPIRED, REVOKED, ...
	Status string
	// NotBefore defaults to now; NotAfter to NotBefore + 395 days.
	NotBefore, NotAfter time.Time
}

// cert is a seeded certificate and, once a TLS listener served it, its
// self-signed stand-in.
type cert struct {
	arn string
	cfg Certificate
	tls *tls.Certificate
}

// AddCertificate seeds an ACM certificate and returns its ARN.
func (f *Fake) AddCertificate(c Certificate) (string, error) {
	if c.Domain == "" || len(c.Domain) > 253 {
		return "", fmt.Errorf("adding certificate: invalid domain %q", c.Domain)
	}
	c.Status = cmp.Or(c.Status, "ISSUED")
	if c.NotBefore.IsZero() {
		c.NotBefore = time.Now().Add(-time.Hour)
	}
	if c.NotAfter.IsZero() {
		c.NotAfter = c.NotBefore.Add(395 * 24 * time.Hour)
	}
	sans := []string{c.Domain}
	for _, s := range c.SANs {
		if !slices.Contains(sans, s) {
			sans = append(sans, s)
		}
	}
	c.SANs = sans
	arn := fmt.Sprintf("arn:aws:acm:%s:%s:certificate/%s-%s", f.opts.Region, f.opts.AccountID, randomID()[:8], randomID())
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.elb.certs == nil {
		f.elb.certs = map[string]*cert{}
	}
	f.elb.certs[arn] = &cert{arn: arn, cfg: c}
	f.elb.corder = append(f.elb.corder, arn)
	return arn, nil
}

// ListenerCertificates returns a listener's default certificate ARN and
// its other ones, for tests.
func (f *Fake) ListenerCertificates(listenerARN string) (string, []string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.elb.listeners[listenerARN]
	if !ok {
		return "", nil, false
	}
	return l.def, slices.Clone(l.certs), true
}

// certificateFor picks the TLS certificate of a listener for a client
// hello: the first of the listener's certificates whose names cover the
// SNI name, else the default one.
func (f *Fake) certificateFor(l *listener) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		f.mu.Lock()
		arns := append([]string{l.def}, l.certs...)
		f.mu.Unlock()
		pick := l.def
		for _, a := range arns {
			f.mu.Lock()
			c := f.elb.certs[a]
			f.mu.Unlock()
			if c != nil && slices.ContainsFunc(c.cfg.SANs, func(n string) bool { return nameCovers(n, hello.ServerName) }) {
				pick = a
				break
			}
		}
		return f.tlsCert(pick)
	}
}

// nameCovers: name equals host, or is "*.rest" and host is one label more.
func nameCovers(name, host string) bool {
	name, host = strings.ToLower(name), strings.ToLower(host)
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		_, after, ok := strings.Cut(host, ".")
		return ok && after == rest
	}
	return name == host
}

// tlsCert returns (making it once) the self-signed stand-in of a
// certificate.
func (f *Fake) tlsCert(arn string) (*tls.Certificate, error) {
	f.mu.Lock()
	c := f.elb.certs[arn]
	f.mu.Unlock()
	if c == nil {
		return nil, fmt.Errorf("certificate %s not found", arn)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.tls != nil {
		return c.tls, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: c.cfg.Domain},
		DNSNames:     c.cfg.SANs,
		NotBefore:    c.cfg.NotBefore,
		NotAfter:     c.cfg.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	c.tls = &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return c.tls, nil
}

// serveACM answers one ACM JSON 1.1 request.
func (f *Fake) serveACM(w http.ResponseWriter, r *http.Request) {
	reqID := f.nextRequestID()
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), acmTargetPrefix)
	fail := func(e *apiError) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.Header().Set("x-amzn-RequestId", reqID)
		w.WriteHeader(e.status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": e.code, "message": e.message})
	}
	if r.Method != http.MethodPost {
		fail(&apiError{status: http.StatusMethodNotAllowed, code: "InvalidAction", message: "method not allowed"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		fail(senderErr("SerializationException", "reading request: %v", err))
		return
	}
	handler, ok := map[string]func([]byte) (any, *apiError){
		"ListCertificates":    f.listCertificates,
		"DescribeCertificate": f.describeCertificate,
	}[op]
	if !ok {
		fail(senderErr("UnknownOperationException", "Operation %q is not supported", op))
		return
	}
	if e := f.fault(op); e != nil {
		fail(e)
		return
	}
	out, e := handler(body)
	if e != nil {
		fail(e)
		return
	}
	b, _ := json.Marshal(out)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("x-amzn-RequestId", reqID)
	_, _ = w.Write(b)
}

// epoch is a JSON 1.1 timestamp: seconds since the epoch.
func epoch(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

func (f *Fake) listCertificates(body []byte) (any, *apiError) {
	var in struct {
		CertificateStatuses []string
		MaxItems            *int
		NextToken           string
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, senderErr("SerializationException", "parsing request: %v", err)
	}
	size := 100
	if in.MaxItems != nil {
		if *in.MaxItems < 1 || *in.MaxItems > 1000 {
			return nil, senderErr("ValidationException", "MaxItems must be between 1 and 1000")
		}
		size = *in.MaxItems
	}
	start, e := decodeMarker(in.NextToken)
	if e != nil {
		return nil, &apiError{status: 400, code: "InvalidNextTokenException", message: "invalid NextToken"}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var sel []*cert
	for _, a := range f.elb.corder {
		c := f.elb.certs[a]
		if len(in.CertificateStatuses) == 0 || slices.Contains(in.CertificateStatuses, c.cfg.Status) {
			sel = append(sel, c)
		}
	}
	start = min(start, len(sel))
	end := min(start+size, len(sel))
	list := []map[string]any{}
	for _, c := range sel[start:end] {
		sans := c.cfg.SANs[:min(len(c.cfg.SANs), 100)]
		list = append(list, map[string]any{
			"CertificateArn":                       c.arn,
			"DomainName":                           c.cfg.Domain,
			"SubjectAlternativeNameSummaries":      sans,
			"HasAdditionalSubjectAlternativeNames": len(c.cfg.SANs) > len(sans),
			"Status":                               c.cfg.Status,
			"Type":                                 "AMAZON_ISSUED",
			"KeyAlgorithm":                         "RSA-2048",
			"NotBefore":                            epoch(c.cfg.NotBefore),
			"NotAfter":                             epoch(c.cfg.NotAfter),
			"InUse":                                f.certInUse(c.arn),
		})
	}
	out := map[string]any{"CertificateSummaryList": list}
	if end < len(sel) {
		out["NextToken"] = encodeMarker(end)
	}
	return out, nil
}

// certInUse: a listener holds the certificate. Caller holds f.mu.
func (f *Fake) certInUse(arn string) bool {
	for _, l := range f.elb.listeners {
		if l.def == arn || slices.Contains(l.certs, arn) {
			return true
		}
	}
	return false
}

func (f *Fake) describeCertificate(body []byte) (any, *apiError) {
	var in struct{ CertificateArn string }
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, senderErr("SerializationException", "parsing request: %v", err)
	}
	if !strings.HasPrefix(in.CertificateArn, "arn:aws:acm:") {
		return nil, senderErr("InvalidArnException", "Invalid ARN '%s'", in.CertificateArn)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.elb.certs[in.CertificateArn]
	if !ok {
		return nil, senderErr("ResourceNotFoundException", "Could not find certificate %s", in.CertificateArn)
	}
	var inUse []string
	for _, a := range f.elb.lorder {
		if l := f.elb.listeners[a]; l.def == c.arn || slices.Contains(l.certs, c.arn) {
			inUse = append(inUse, l.lb)
		}
	}
	return map[string]any{"Certificate": map[string]any{
		"CertificateArn":          c.arn,
		"DomainName":              c.cfg.Domain,
		"SubjectAlternativeNames": c.cfg.SANs,
		"Status":                  c.cfg.Status,
		"Type":                    "AMAZON_ISSUED",
		"KeyAlgorithm":            "RSA-2048",
		"NotBefore":               epoch(c.cfg.NotBefore),
		"NotAfter":                epoch(c.cfg.NotAfter),
		"InUseBy":                 inUse,
	}}, nil
}
