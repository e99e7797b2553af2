package gatewayhosts_test

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/dns"
	"sluice.dev/sluice/internal/dns/gatewayhosts"
	"sluice.dev/sluice/internal/gateway"
	"sluice.dev/sluice/internal/golden"
	"sluice.dev/sluice/internal/translate"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// options is the optional "kind: Options" document of a case.
type options struct {
	Aliases       bool              `json:"aliases"`
	HostedZoneIDs map[string]string `json:"hostedZoneIDs"`
	// Ownership "none" turns host ownership off.
	Ownership string `json:"ownership"`
}

// TestGolden runs every testdata/*.yaml (Gateway API objects, Ingresses
// and IngressClasses, an Options document) through Sources, with host
// ownership decided by translate.HostOwnership as the controller does,
// then the sources and the Ingresses' hosts through dns.Desired for zone
// example.com, and compares sources, problems and desired records with
// the .golden file beside it (-update rewrites).
func TestGolden(t *testing.T) {
	golden.Run(t, "testdata/*.yaml", *update, func(t *testing.T, c golden.Case) string {
		data, err := os.ReadFile(c.Input)
		if err != nil {
			t.Fatal(err)
		}
		return run(t, data)
	})
}

func run(t *testing.T, data []byte) string {
	t.Helper()
	var in translate.Input
	var o options
	err := golden.Documents(data, func(kind string, doc []byte) error {
		switch kind {
		case "Options":
			return yaml.UnmarshalStrict([]byte(strings.Replace(string(doc), "kind: Options", "", 1)), &o)
		case "GatewayClass":
			return golden.Append(&in.Gateway.GatewayClasses, doc)
		case "Gateway":
			return golden.Append(&in.Gateway.Gateways, doc)
		case "HTTPRoute":
			return golden.Append(&in.Gateway.HTTPRoutes, doc)
		case "GRPCRoute":
			return golden.Append(&in.Gateway.GRPCRoutes, doc)
		case "Ingress":
			return golden.Append(&in.Ingresses, doc)
		case "IngressClass":
			return golden.Append(&in.IngressClasses, doc)
		}
		return fmt.Errorf("unknown kind %q", kind)
	})
	if err != nil {
		t.Fatal(err)
	}
	gopts := gateway.Options{SecretsUnread: true}
	own := translate.HostOwnership(in, translate.Options{Gateway: &gopts, SecretsUnread: true, HostOwnership: o.Ownership})
	srcs, problems := gatewayhosts.Sources(gateway.Input{
		GatewayClasses: in.Gateway.GatewayClasses, Gateways: in.Gateway.Gateways,
		HTTPRoutes: in.Gateway.HTTPRoutes, GRPCRoutes: in.Gateway.GRPCRoutes,
	}, gatewayhosts.Options{Gateway: gopts, Ownership: own, HostedZoneIDs: o.HostedZoneIDs})

	var b strings.Builder
	b.WriteString("## sources\n")
	for _, s := range srcs {
		fmt.Fprintf(&b, "%s from %s known=%v addresses=%v\n", s.Host, s.Ingress.Object(), s.Known, s.Addresses)
	}
	b.WriteString("\n## problems\n")
	for _, p := range problems {
		fmt.Fprintf(&b, "%s %s %v: %s\n", p.Kind, p.Host, p.Ingress, p.Message)
	}
	// The Ingresses' hosts join as the controller adds them (their
	// owners' only), all served at 192.0.2.99.
	all := srcs
	for _, ing := range in.Ingresses {
		for _, r := range ing.Spec.Rules {
			if r.Host != "" && own.Owns(ing.Namespace, r.Host) {
				all = append(all, dns.Source{Host: r.Host, Ingress: dns.Ref{Namespace: ing.Namespace, Name: ing.Name},
					Addresses: []dns.Address{{IP: "192.0.2.99"}}, Known: true})
			}
		}
	}
	wants, dp := dns.Desired(all, dns.DesiredOptions{Zones: []dns.Zone{{ID: "example.com", Name: "example.com"}}, TTL: 60, Aliases: o.Aliases})
	b.WriteString("\n## desired\n")
	for _, w := range wants {
		fmt.Fprintf(&b, "%s owner=%s keep=%v\n", w.Name, w.Owner.Object(), w.Keep)
		for _, r := range w.Records {
			fmt.Fprintf(&b, "  %s\n", r)
		}
	}
	for _, p := range dp {
		fmt.Fprintf(&b, "problem %s %s %v: %s\n", p.Kind, p.Host, p.Ingress, p.Message)
	}
	return b.String()
}
