package main

import (
	"io"
	"testing"
)

// TestParseProxyGatewayFlags: Gateway API is off unless --gateway-class
// names a class; its ports default to 80 and 443; bad values are refused.
func TestParseProxyGatewayFlags(t *testing.T) {
	c, err := parseProxyFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.gatewayOptions() != nil {
		t.Errorf("Gateway API on by default: %+v", c.gatewayOptions())
	}
	c, err = parseProxyFlags([]string{"--gateway-class", "internet", "--gateway-http-port", "8080"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o := c.gatewayOptions()
	if o == nil || o.GatewayClass != "internet" || o.HTTPPort != 8080 || o.HTTPSPort != 443 {
		t.Errorf("gateway options = %+v", o)
	}
	for _, args := range [][]string{
		{"--gateway-class", "Not_A_Name"},
		{"--gateway-class", "x", "--gateway-https-port", "0"},
		{"--gateway-class", "x", "--gateway-http-port", "70000"},
		{"--gateway-class", "x", "--manifests", "dir"},
	} {
		if _, err := parseProxyFlags(args, io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

// TestParseControllerGatewayFlags: the controller writes Gateway API
// statuses only with --gateway-api, with the proxies' ports.
func TestParseControllerGatewayFlags(t *testing.T) {
	c, err := parseControllerFlags([]string{"--namespace", "sluice-system"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.gatewayOptions() != nil {
		t.Error("Gateway API statuses on by default")
	}
	c, err = parseControllerFlags([]string{"--namespace", "sluice-system", "--gateway-api", "--gateway-https-port", "8443"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o := c.gatewayOptions(); o == nil || o.HTTPPort != 80 || o.HTTPSPort != 8443 {
		t.Errorf("gateway options = %+v", o)
	}
	if _, err := parseControllerFlags([]string{"--namespace", "sluice-system", "--gateway-api", "--gateway-http-port", "-1"}, io.Discard); err == nil {
		t.Error("--gateway-http-port -1 accepted")
	}
}
