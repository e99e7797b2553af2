package main

import (
	"io"
	"testing"
)

// --ingress-nginx-compat: off by default; on for both commands, with the
// class name checked.
func TestIngressNginxCompatFlags(t *testing.T) {
	c, err := parseProxyFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := c.nginx.options(); o != nil || err != nil {
		t.Errorf("default: %v %v, want off", o, err)
	}
	c, err = parseProxyFlags([]string{"--ingress-nginx-compat"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := c.nginx.options(); err != nil || o == nil || o.Class != "nginx" {
		t.Errorf("proxy: %+v %v, want class nginx", o, err)
	}
	cc, err := parseControllerFlags([]string{"--namespace", "sluice", "--ingress-nginx-compat", "--ingress-nginx-class", "Bad Name"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cc.nginx.options(); err == nil {
		t.Error("controller: an invalid class name accepted")
	}
}
