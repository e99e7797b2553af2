package gatewayhosts_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/dns"
	"sluice.dev/sluice/internal/dns/gatewayhosts"
	"sluice.dev/sluice/internal/gateway"
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
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got := run(t, data)
			golden := strings.TrimSuffix(f, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("reading golden file (run with -update to create it): %v", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from %s:\n--- got\n%s\n--- want\n%s", f, golden, got, want)
			}
		})
	}
}

func run(t *testing.T, data []byte) string {
	t.Helper()
	var in translate.Input
	var o options
	for i, doc := range strings.Split(string(data), "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		var err error
		switch tm.Kind {
		case "Options":
			err = yaml.UnmarshalStrict([]byte(strings.Replace(doc, "kind: Options", "", 1)), &o)
		case "GatewayClass":
			v := &gatewayv1.GatewayClass{}
			err = yaml.UnmarshalStrict([]byte(doc), v)
			in.Gateway.GatewayClasses = append(in.Gateway.GatewayClasses, v)
		case "Gateway":
			v := &gatewayv1.Gateway{}
			err = yaml.UnmarshalStrict([]byte(doc), v)
			in.Gateway.Gateways = append(in.Gateway.Gateways, v)
		case "HTTPRoute":
			v := &gatewayv1.HTTPRoute{}
			err = yaml.UnmarshalStrict([]byte(doc), v)
			in.Gateway.HTTPRoutes = append(in.Gateway.HTTPRoutes, v)
		case "GRPCRoute":
			v := &gatewayv1.GRPCRoute{}
			err = yaml.UnmarshalStrict([]byte(doc), v)
			in.Gateway.GRPCRoutes = append(in.Gateway.GRPCRoutes, v)
		case "Ingress":
			v := &networkingv1.Ingress{}
			err = yaml.UnmarshalStrict([]byte(doc), v)
			in.Ingresses = append(in.Ingresses, v)
		case "IngressClass":
			v := &networkingv1.IngressClass{}
			err = yaml.UnmarshalStrict([]byte(doc), v)
			in.IngressClasses = append(in.IngressClasses, v)
		default:
			err = fmt.Errorf("unknown kind %q", tm.Kind)
		}
		if err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
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
