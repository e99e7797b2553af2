package main

import (
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestGatewayExtraPorts(t *testing.T) {
	c, err := parseProxyFlags([]string{"--gateway-class", "sluice", "--gateway-extra-http-ports", "8090, 8080-8082,8080", "--gateway-extra-https-ports", "8443"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o := c.gatewayOptions()
	if want := []int32{8080, 8081, 8082, 8090}; !reflect.DeepEqual(o.ExtraHTTPPorts, want) {
		t.Errorf("extra HTTP ports %v, want %v", o.ExtraHTTPPorts, want)
	}
	if want := []int32{8443}; !reflect.DeepEqual(o.ExtraHTTPSPorts, want) {
		t.Errorf("extra HTTPS ports %v, want %v", o.ExtraHTTPSPorts, want)
	}
	for _, bad := range [][]string{
		{"--gateway-extra-http-ports", "80"},
		{"--gateway-extra-http-ports", "8080", "--gateway-extra-https-ports", "8080"},
		{"--gateway-extra-http-ports", "0"},
		{"--gateway-extra-http-ports", "65536"},
		{"--gateway-extra-http-ports", "9000-8000"},
		{"--gateway-extra-http-ports", "1-65535"},
		{"--gateway-extra-http-ports", "x"},
		{"--gateway-extra-https-ports", "443"},
	} {
		if _, err := parseProxyFlags(append([]string{"--gateway-class", "sluice"}, bad...), io.Discard); err == nil {
			t.Errorf("%s accepted", strings.Join(bad, " "))
		}
		if _, err := parseControllerFlags(append([]string{"--gateway-api"}, bad...), io.Discard); err == nil {
			t.Errorf("controller: %s accepted", strings.Join(bad, " "))
		}
	}
	if _, err := parseProxyFlags([]string{"--gateway-addresses", "192.0.2.1,bad", "--gateway-class", "sluice"}, io.Discard); err == nil {
		t.Error("--gateway-addresses with a bad address accepted")
	}
	for _, bad := range [][]string{{"--gateway", "web"}, {"--gateway", "Infra/web"}, {"--gateway", "infra/"}, {"--gateway", "infra/web/x"}} {
		if _, err := parseProxyFlags(append([]string{"--gateway-class", "sluice"}, bad...), io.Discard); err == nil {
			t.Errorf("%s accepted", strings.Join(bad, " "))
		}
	}
	if _, err := parseProxyFlags([]string{"--gateway", "infra/web"}, io.Discard); err == nil {
		t.Error("--gateway without --gateway-class accepted")
	}
	if c, err := parseProxyFlags([]string{"--gateway", "infra/web", "--gateway-class", "sluice"}, io.Discard); err != nil || c.gatewayOptions().Gateway != "infra/web" {
		t.Errorf("--gateway infra/web: %v", err)
	}
	if _, err := parseProxyFlags([]string{"--gateway-addresses", "192.0.2.1"}, io.Discard); err == nil {
		t.Error("--gateway-addresses without --gateway-class accepted")
	}
	c, err = parseProxyFlags([]string{"--gateway-addresses", "192.0.2.2, ::ffff:192.0.2.1,192.0.2.2", "--gateway-class", "sluice"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.gatewayOptions().Addresses; len(got) != 2 || got[0].String() != "192.0.2.1" || got[1].String() != "192.0.2.2" {
		t.Errorf("addresses %v", got)
	}
}
