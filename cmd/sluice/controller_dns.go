package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"sluice.dev/sluice/internal/controller/manager"
	"sluice.dev/sluice/internal/dns"
	"sluice.dev/sluice/internal/dns/rfc2136"
	"sluice.dev/sluice/internal/dns/route53"
)

// dnsConfig is the DNS part of `sluice controller`'s command line.
type dnsConfig struct {
	provider       string
	zones          listFlag
	ownerID        string
	policy         string
	ttl            time.Duration
	deleteDelay    time.Duration
	interval       time.Duration
	dryRun         bool
	rfc2136Server  string
	tsigKeyName    string
	tsigSecretFile string
	tsigAlgorithm  string
	route53URL     string
	keyFile        string
	adoptUnsigned  bool
	allowApex      bool
	namespaces     namespaceDomains
}

// namespaceDomains is the repeatable --dns-namespace-domains flag, parsed
// as it is set.
type namespaceDomains struct{ d dns.NamespaceDomains }

func (n *namespaceDomains) String() string {
	if n == nil {
		return ""
	}
	var out []string
	for ns, p := range n.d {
		out = append(out, ns+"="+strings.Join(p, ","))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// Set takes one or more NAMESPACE=DOMAIN[,DOMAIN...] entries in one
// comma-separated list: an element with "=" starts the next namespace
// ("a=x.example,y.example,b=z.example"), as one environment variable needs.
func (n *namespaceDomains) Set(v string) error {
	var entries []string
	for _, e := range strings.Split(v, ",") {
		if len(entries) == 0 || strings.Contains(e, "=") {
			entries = append(entries, e)
			continue
		}
		entries[len(entries)-1] += "," + e
	}
	for _, e := range entries {
		ns, patterns, err := dns.ParseNamespaceDomains(e)
		if err != nil {
			return err
		}
		if n.d == nil {
			n.d = dns.NamespaceDomains{}
		}
		n.d.Add(ns, patterns)
	}
	return nil
}

func (d *dnsConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&d.provider, "dns-provider", "none", "DNS records for Ingress hosts: none, rfc2136 or route53")
	fs.Var(&d.zones, "dns-zone", "zones to manage (comma-separated, or repeated): each a domain (rfc2136, route53) or a hosted-zone ID (route53)")
	fs.StringVar(&d.ownerID, "dns-owner-id", "", "owner ID written into every ownership TXT record; required when --dns-provider is not none")
	fs.StringVar(&d.policy, "dns-policy", "sync", "which changes DNS may make: sync (create, update, delete), upsert-only or create-only")
	fs.DurationVar(&d.ttl, "dns-ttl", 60*time.Second, "TTL of the records sluice writes")
	fs.DurationVar(&d.deleteDelay, "dns-delete-delay", 0, "how long a name stays after no Ingress wants it (default: 2× --dns-ttl)")
	fs.DurationVar(&d.interval, "dns-interval", time.Minute, "how often DNS is reconciled when nothing changes (a change to an Ingress, IngressClass or binding reconciles at once); each pass reads the zones")
	fs.BoolVar(&d.dryRun, "dns-dry-run", false, "log the DNS changes instead of making them")
	fs.StringVar(&d.rfc2136Server, "rfc2136-server", "", "host:port of the DNS server that takes dynamic updates (rfc2136)")
	fs.StringVar(&d.tsigKeyName, "rfc2136-tsig-key-name", "", "TSIG key name (rfc2136)")
	fs.StringVar(&d.tsigSecretFile, "rfc2136-tsig-secret-file", "", "file holding the base64 TSIG secret (rfc2136)")
	fs.StringVar(&d.tsigAlgorithm, "rfc2136-tsig-algorithm", "hmac-sha256", "TSIG algorithm: hmac-sha256, hmac-sha512, hmac-sha384, hmac-sha224 or hmac-sha1 (rfc2136)")
	fs.StringVar(&d.route53URL, "route53-endpoint", "", "Route53 API endpoint URL (tests, the awsfake); default: AWS")
	fs.StringVar(&d.keyFile, "dns-ownership-key-file", "", "file of base64 keys (one a line, at least 16 bytes each) that sign ownership TXT records: the first signs, all verify (rotation); required when --dns-provider is not none")
	fs.BoolVar(&d.adoptUnsigned, "dns-adopt-unsigned", false, "re-sign the unsigned ownership records of this --dns-owner-id that a wanted host holds (once, when upgrading from unsigned records; then turn it off)")
	fs.BoolVar(&d.allowApex, "dns-allow-apex", false, "publish hosts that are the apex of a managed zone (default: refused with an ApexNotAllowed Event)")
	fs.Var(&d.namespaces, "dns-namespace-domains", `NAMESPACE=DOMAIN[,DOMAIN...]: the hosts the Ingresses of NAMESPACE may publish ("a.example.com" that name, "*.a.example.com" every name below it); repeatable, or several in one comma-separated list (an element with "=" starts the next namespace: a=x.example,b=y.example); once given, namespaces not listed publish nothing (default: any host in the zones)`)
}

// ownerIDPattern keeps owner IDs out of the ownership record's syntax.
var ownerIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// check validates the DNS flags.
func (d *dnsConfig) check() error {
	switch d.provider {
	case "none":
		return nil
	case "rfc2136", "route53":
	default:
		return fmt.Errorf("--dns-provider must be none, rfc2136 or route53, not %q", d.provider)
	}
	if len(d.zones) == 0 {
		return errors.New("--dns-zone is required when --dns-provider is not none")
	}
	if !ownerIDPattern.MatchString(d.ownerID) {
		return fmt.Errorf("--dns-owner-id is required when --dns-provider is not none: 1 to 64 letters, digits, '.', '_', ':' or '-', not %q", d.ownerID)
	}
	if d.keyFile == "" {
		return errors.New("--dns-ownership-key-file is required when --dns-provider is not none: ownership records are signed so that nobody with write access to TXT records can make sluice overwrite or delete a name (see docs/guides/dns.md for the upgrade from unsigned records)")
	}
	if _, err := dns.ParsePolicy(d.policy); err != nil {
		return fmt.Errorf("--dns-policy: %w", err)
	}
	if d.ttl < time.Second || d.deleteDelay < 0 {
		return errors.New("--dns-ttl must be at least 1s and --dns-delete-delay not negative")
	}
	if d.interval < time.Second {
		return errors.New("--dns-interval must be at least 1s")
	}
	switch d.provider {
	case "rfc2136":
		if _, _, err := net.SplitHostPort(d.rfc2136Server); err != nil {
			return fmt.Errorf("--rfc2136-server must be host:port, not %q", d.rfc2136Server)
		}
		if (d.tsigKeyName == "") != (d.tsigSecretFile == "") {
			return errors.New("--rfc2136-tsig-key-name and --rfc2136-tsig-secret-file go together")
		}
	case "route53":
		if d.route53URL != "" {
			u, err := url.Parse(d.route53URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("--route53-endpoint must be an http:// or https:// URL, not %q", d.route53URL)
			}
		}
	}
	return nil
}

// options builds the manager's DNS options (nil when DNS is off),
// constructing the provider.
func (d *dnsConfig) options(ctx context.Context, log *slog.Logger) (*manager.DNSOptions, error) {
	if d.provider == "none" {
		return nil, nil
	}
	b, err := os.ReadFile(d.keyFile)
	if err != nil {
		return nil, fmt.Errorf("reading --dns-ownership-key-file: %w", err)
	}
	keys, err := dns.ParseKeyFile(b)
	if err != nil {
		return nil, fmt.Errorf("--dns-ownership-key-file %s: %w", d.keyFile, err)
	}
	o := &manager.DNSOptions{OwnerID: d.ownerID, Policy: dns.Policy(d.policy), TTL: d.ttl, DeleteDelay: d.deleteDelay, DryRun: d.dryRun,
		Interval: d.interval, Keys: keys, AdoptUnsigned: d.adoptUnsigned, AllowApex: d.allowApex, NamespaceDomains: d.namespaces.d}
	if d.adoptUnsigned {
		log.Warn("--dns-adopt-unsigned is on: unsigned ownership records with this owner ID are taken as sluice's and re-signed; turn it off once every name is re-signed",
			"ownerID", d.ownerID)
	}
	switch d.provider {
	case "rfc2136":
		var secret string
		if d.tsigSecretFile != "" {
			b, err := os.ReadFile(d.tsigSecretFile)
			if err != nil {
				return nil, fmt.Errorf("reading --rfc2136-tsig-secret-file: %w", err)
			}
			secret = strings.TrimSpace(string(b))
		}
		p, err := rfc2136.New(rfc2136.Options{Server: d.rfc2136Server, Zones: d.zones, KeyName: d.tsigKeyName, Secret: secret,
			Algorithm: d.tsigAlgorithm, Logger: log.With("provider", "rfc2136")})
		if err != nil {
			return nil, err
		}
		o.Provider = p
	case "route53":
		p, err := route53.New(ctx, route53.Options{Endpoint: d.route53URL, Zones: d.zones, Logger: log.With("provider", "route53")})
		if err != nil {
			return nil, fmt.Errorf("creating the route53 provider: %w", err)
		}
		o.Provider, o.Aliases = p, true
	}
	return o, nil
}

// controllerNamespace is the controller's own namespace, whose bindings
// serve IngressClasses without binding parameters: --namespace, else
// $POD_NAMESPACE, else the service account's namespace, else the
// leader-election namespace.
func controllerNamespace(flagValue, leaderElection string) string {
	if flagValue != "" {
		return flagValue
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil && len(b) > 0 {
		return strings.TrimSpace(string(b))
	}
	return leaderElection
}
