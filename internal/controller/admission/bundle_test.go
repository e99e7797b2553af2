package admission

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"slices"
	"testing"
	"time"
)

func testCA(t *testing.T, name string, from, to time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: from, NotAfter: to,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func names(t *testing.T, bundle []byte) []string {
	t.Helper()
	var out []string
	for b, rest := pem.Decode(bundle); b != nil; b, rest = pem.Decode(rest) {
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c.Subject.CommonName)
	}
	return out
}

func TestMergeBundle(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	ca := func(name string, ageDays int) []byte {
		return testCA(t, name, now.AddDate(0, 0, -ageDays), now.AddDate(1, 0, 0))
	}
	own, r1, r2, r3 := ca("own", 0), ca("r1", 1), ca("r2", 2), ca("r3", 3)
	expired := testCA(t, "expired", now.AddDate(-2, 0, 0), now.AddDate(0, 0, -1))
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	for _, tc := range []struct {
		name    string
		current []byte
		max     int
		want    []string
		changed bool
	}{
		{"empty", nil, 8, []string{"own"}, true},
		{"another replica's kept", r1, 8, []string{"own", "r1"}, true},
		{"already there", cat(r1, own), 8, []string{"r1", "own"}, false},
		{"expired dropped", cat(own, expired, r1), 8, []string{"own", "r1"}, true},
		{"duplicates dropped", cat(own, r1, r1), 8, []string{"own", "r1"}, true},
		{"garbage dropped", cat(own, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")), 8, []string{"own"}, true},
		{"oldest beyond max dropped", cat(r3, r1, r2), 3, []string{"own", "r1", "r2"}, true},
		{"own kept at max", cat(r3, r2, r1, own), 2, []string{"own", "r1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := mergeBundle(tc.current, own, now, tc.max)
			if g := names(t, got); changed != tc.changed || !slices.Equal(g, tc.want) {
				t.Errorf("mergeBundle = %v changed %v, want %v changed %v", g, changed, tc.want, tc.changed)
			}
		})
	}
}
