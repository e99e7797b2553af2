package server

import (
	"crypto/tls"
	"testing"
	"time"
)

func TestSelfSignedHandshake(t *testing.T) {
	now := time.Now()
	cert, err := SelfSigned(now)
	if err != nil {
		t.Fatal(err)
	}
	if l := cert.Leaf; l.Subject.CommonName != SelfSignedName || !l.NotBefore.Before(now) || l.NotAfter.Before(now.AddDate(9, 0, 0)) {
		t.Errorf("leaf %s valid %s to %s", l.Subject, l.NotBefore, l.NotAfter)
	}
	other, err := SelfSigned(now)
	if err != nil {
		t.Fatal(err)
	}
	if other.Leaf.SerialNumber.Cmp(cert.Leaf.SerialNumber) == 0 {
		t.Error("two certificates with one serial")
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{*cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.(*tls.Conn).Handshake()
		c.Close()
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{ServerName: "app.example.com", InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.ConnectionState().PeerCertificates[0]; !got.Equal(cert.Leaf) {
		t.Errorf("handshake served %s", got.Subject)
	}
}
