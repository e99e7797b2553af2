package admission

import (
	"bytes"
	"cmp"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"time"
)

// Every controller replica serves the webhooks with a serving certificate
// from a CA of its own (generated, kept in memory or in CertDir), so the
// caBundle the API server verifies them with holds the CAs of every
// replica: each replica adds its own and keeps the others'. A CA that has
// expired is dropped; beyond MaxCAs (replicas that restarted leave theirs
// behind) the oldest others are dropped: a replica still running checks
// every RecheckEvery and adds its CA back.

// MaxCAs bounds the CAs a caBundle keeps: comfortably more than the
// controller replicas.
const MaxCAs = 8

// mergeBundle returns the caBundle holding own and the CAs of current
// that are still valid at now and are not own, newest first, at most max
// in all; changed is false when current needs no write (it holds own and
// nothing to drop).
func mergeBundle(current, own []byte, now time.Time, max int) (merged []byte, changed bool) {
	ownBlock, _ := pem.Decode(own)
	if ownBlock == nil {
		return current, false
	}
	type ca struct {
		der       []byte
		notBefore time.Time
	}
	var others []ca
	hasOwn, dropped := false, false
	rest := current
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if bytes.Equal(b.Bytes, ownBlock.Bytes) {
			hasOwn = true
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if b.Type != "CERTIFICATE" || err != nil || now.After(c.NotAfter) || slices.ContainsFunc(others, func(o ca) bool { return bytes.Equal(o.der, b.Bytes) }) {
			dropped = true
			continue
		}
		others = append(others, ca{der: b.Bytes, notBefore: c.NotBefore})
	}
	slices.SortStableFunc(others, func(a, b ca) int { return cmp.Compare(b.notBefore.UnixNano(), a.notBefore.UnixNano()) })
	if len(others) > max-1 {
		others, dropped = others[:max-1], true
	}
	if hasOwn && !dropped && len(bytes.TrimSpace(rest)) == 0 {
		return current, false
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ownBlock.Bytes})
	for _, o := range others {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: o.der})...)
	}
	return out, true
}
