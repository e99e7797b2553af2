package provider

import (
	"errors"
	"testing"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/lb"
)

func TestRuntimeAddress(t *testing.T) {
	cases := []struct{ in, want string }{
		{"unix:///run/haproxy/admin.sock", "unix:/run/haproxy/admin.sock"},
		{"tcp://127.0.0.1:9999", "127.0.0.1:9999"},
		{"tcp://haproxy.lb:9999", "haproxy.lb:9999"},
		{"unix://", ""},
		{"tcp://", ""},
		{"tcp://host:1/path", ""},
		{"http://x", ""},
		{"/run/x.sock", ""},
	}
	for _, tc := range cases {
		got, err := RuntimeAddress(tc.in)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("RuntimeAddress(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if err != nil && !errors.Is(err, lb.ErrInvalid) {
			t.Errorf("RuntimeAddress(%q) error %v is not lb.ErrInvalid", tc.in, err)
		}
	}
}

func TestCacheFor(t *testing.T) {
	c := New(Options{})
	hp := func(addr, backend string) v1alpha1.ProviderSpec {
		return v1alpha1.ProviderSpec{HAProxy: &v1alpha1.HAProxyProvider{RuntimeAPI: addr, Backend: backend}}
	}
	p1, g1, err := c.For(hp("unix:///a.sock", "be1"))
	if err != nil || g1 != "be1" {
		t.Fatal(g1, err)
	}
	p2, g2, _ := c.For(hp("unix:///a.sock", "be2"))
	p3, _, _ := c.For(hp("tcp://127.0.0.1:1", "be1"))
	if p1 != p2 || g2 != "be2" {
		t.Error("same runtime API, different backend: provider not shared")
	}
	if p1 == p3 {
		t.Error("different runtime APIs share a provider")
	}
	if _, _, err := c.For(v1alpha1.ProviderSpec{AWS: &v1alpha1.AWSProvider{}}); !errors.Is(err, ErrNotSupported) {
		t.Errorf("aws: %v", err)
	}
	if _, _, err := c.For(v1alpha1.ProviderSpec{}); !errors.Is(err, lb.ErrInvalid) {
		t.Errorf("empty: %v", err)
	}
	if _, _, err := c.For(hp("ftp://x", "be")); !errors.Is(err, lb.ErrInvalid) {
		t.Errorf("bad address: %v", err)
	}
}
