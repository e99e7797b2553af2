package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

func TestTenancyFlags(t *testing.T) {
	c, err := parseProxyFlags([]string{"--manifests", "dir"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.tenancy.hostOwnership != "namespace" || c.sslRedirect {
		t.Errorf("defaults: host ownership %q, ssl redirect %v; want namespace, false", c.tenancy.hostOwnership, c.sslRedirect)
	}
	if got := c.tenancy.namespaces("sluice-system"); !slices.Equal(got, []string{"sluice-system"}) {
		t.Errorf("default catch-all namespaces = %v, want the release's", got)
	}
	if got := c.tenancy.namespaces(""); got != nil {
		t.Errorf("outside a cluster: %v, want nil (every namespace)", got)
	}
	c, err = parseProxyFlags([]string{"--manifests", "dir", "--host-ownership", "none", "--default-backend-namespaces", " platform, edge ,", "--ssl-redirect"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.tenancy.namespaces("sluice-system"); !slices.Equal(got, []string{"platform", "edge"}) || c.tenancy.hostOwnership != "none" || !c.sslRedirect {
		t.Errorf("got %v %q %v", got, c.tenancy.hostOwnership, c.sslRedirect)
	}
	cc, err := parseControllerFlags([]string{"--leader-election-namespace", "ns", "--default-backend-namespaces", "*"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := cc.tenancy.namespaces("ns"); !slices.Equal(got, []string{"*"}) {
		t.Errorf("controller: %v", got)
	}
	for _, args := range [][]string{
		{"--manifests", "dir", "--host-ownership", "cluster"},
		{"--manifests", "dir", "--default-backend-namespaces", "Not_A_Namespace"},
	} {
		if _, err := parseProxyFlags(args, io.Discard); err == nil || !strings.Contains(err.Error(), args[2]) {
			t.Errorf("parseProxyFlags(%q) error = %v", args, err)
		}
	}
}
