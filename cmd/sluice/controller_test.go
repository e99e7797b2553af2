package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseControllerFlags(t *testing.T) {
	c, err := parseControllerFlags([]string{"--kubeconfig", "k", "--leader-election-namespace", "ns",
		"--aws-endpoint", "http://127.0.0.1:4566", "--fast-poll-interval", "500ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.kubeconfig != "k" || c.leaderElectionNamespace != "ns" || c.awsEndpoint != "http://127.0.0.1:4566" || c.fastPollInterval != 500*time.Millisecond {
		t.Errorf("parsed %+v", c)
	}
	if !c.leaderElect || c.ingressClass != "sluice" || c.pollInterval != 10*time.Second || c.haproxyMaxDrain != time.Minute {
		t.Errorf("defaults not applied: %+v", c)
	}
}

func TestParseControllerFlagsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--log-format", "xml"}, "--log-format"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--poll-interval", "0s"}, "--poll-interval must be positive"},
		{[]string{"--haproxy-max-drain", "-1s"}, "--haproxy-max-drain must be positive"},
		{[]string{"--aws-endpoint", "ftp://x"}, "--aws-endpoint"},
		{[]string{"--aws-endpoint", "http://"}, "--aws-endpoint"},
		{[]string{"--ingress-class", ""}, "must not be empty"},
		{[]string{"stray"}, "unexpected arguments"},
	} {
		_, err := parseControllerFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseControllerFlags(%q) error = %v, want it to mention %q", tc.args, err, tc.want)
		}
	}
}

func TestParseDNSFlags(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "sluice-system") // the default of --binding-namespaces
	c, err := parseControllerFlags([]string{"--dns-provider", "rfc2136", "--dns-zone", "example.com", "--dns-zone", "example.org",
		"--dns-owner-id", "prod-eu", "--rfc2136-server", "127.0.0.1:53", "--dns-policy", "upsert-only",
		"--dns-ownership-key-file", "/etc/sluice/dns-ownership/keys", "--dns-allow-apex", "--dns-adopt-unsigned",
		"--dns-namespace-domains", "team-a=a.example.com,*.a.example.com", "--dns-namespace-domains", "team-b=b.example.com",
		"--dns-namespace-domains", "team-a=c.example.com"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	d := c.dns
	if d.provider != "rfc2136" || len(d.zones) != 2 || d.ownerID != "prod-eu" || d.policy != "upsert-only" || d.ttl != time.Minute || d.tsigAlgorithm != "hmac-sha256" ||
		d.keyFile != "/etc/sluice/dns-ownership/keys" || !d.allowApex || !d.adoptUnsigned {
		t.Errorf("parsed %+v", d)
	}
	if got := d.namespaces.String(); got != "team-a=a.example.com,*.a.example.com,c.example.com team-b=b.example.com" {
		t.Errorf("--dns-namespace-domains = %q", got)
	}
	c, err = parseControllerFlags(nil, io.Discard)
	if err != nil || c.dns.provider != "none" || c.dns.policy != "sync" {
		t.Errorf("defaults: %+v, %v", c.dns, err)
	}
}

func TestParseDNSFlagsErrors(t *testing.T) {
	on := []string{"--dns-provider", "rfc2136", "--dns-zone", "example.com", "--rfc2136-server", "127.0.0.1:53", "--dns-ownership-key-file", "k"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dns-provider", "bind"}, "--dns-provider"},
		{[]string{"--dns-provider", "rfc2136", "--dns-owner-id", "x"}, "--dns-zone"},
		{on, "--dns-owner-id is required"},
		{append(on, "--dns-owner-id", "a;b"), "--dns-owner-id"},
		{[]string{"--dns-provider", "rfc2136", "--dns-zone", "example.com", "--rfc2136-server", "127.0.0.1:53", "--dns-owner-id", "a"}, "--dns-ownership-key-file is required"},
		{append(on, "--dns-owner-id", "a", "--dns-namespace-domains", "team-a"), "NAMESPACE=DOMAIN"},
		{append(on, "--dns-owner-id", "a", "--dns-namespace-domains", "team-a=com"), "neither a domain name"},
		{append(on, "--dns-owner-id", "a", "--dns-policy", "upsert"), "--dns-policy"},
		{append(on, "--dns-owner-id", "a", "--dns-ttl", "0s"), "--dns-ttl"},
		{append(on, "--dns-owner-id", "a", "--dns-interval", "10ms"), "--dns-interval"},
		{append(on, "--dns-owner-id", "a", "--rfc2136-tsig-key-name", "k"), "go together"},
		{[]string{"--dns-provider", "rfc2136", "--dns-zone", "example.com", "--dns-owner-id", "a", "--dns-ownership-key-file", "k", "--rfc2136-server", "nohost"}, "--rfc2136-server"},
		{[]string{"--dns-provider", "route53", "--dns-zone", "Z1", "--dns-owner-id", "a", "--dns-ownership-key-file", "k", "--route53-endpoint", "ftp://x"}, "--route53-endpoint"},
	} {
		_, err := parseControllerFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseControllerFlags(%q) error = %v, want it to mention %q", tc.args, err, tc.want)
		}
	}
}

// TestDNSOwnershipKeyFile: the key file is read when DNS starts; a
// missing or bad file stops it.
func TestDNSOwnershipKeyFile(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "keys"), filepath.Join(dir, "bad")
	if err := os.WriteFile(good, []byte("# new\nMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjI=\n# old, verifies only\nMTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTE=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("c2hvcnQ=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for file, want := range map[string]string{good: "", bad: "at least 16", filepath.Join(dir, "missing"): "reading --dns-ownership-key-file"} {
		d := dnsConfig{provider: "rfc2136", zones: listFlag{"example.com"}, ownerID: "a", rfc2136Server: "127.0.0.1:53", keyFile: file}
		o, err := d.options(context.Background(), log)
		switch {
		case want == "" && (err != nil || o.Keys.Len() != 2):
			t.Errorf("%s: %v", file, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: error %v, want it to mention %q", file, err, want)
		}
	}
}
