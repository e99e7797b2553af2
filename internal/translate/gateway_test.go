package translate

import (
	"math/rand/v2"
	"net/netip"
	"strings"

	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/gateway"
	"sluice.dev/sluice/internal/golden"
)

// decodeGatewayDoc decodes the Gateway API kinds of a golden input, the
// Namespaces their listeners select by, and "kind: GatewayOptions"
// (gateway.Options; its presence turns Gateway API on). known is false for
// other kinds.
func decodeGatewayDoc(kind string, doc []byte, in *Input, opts *Options) (known bool, err error) {
	g := &in.Gateway
	switch kind {
	case "GatewayClass":
		err = golden.Append(&g.GatewayClasses, doc)
	case "Gateway":
		err = golden.Append(&g.Gateways, doc)
	case "HTTPRoute":
		err = golden.Append(&g.HTTPRoutes, doc)
	case "GRPCRoute":
		err = golden.Append(&g.GRPCRoutes, doc)
	case "ReferenceGrant":
		err = golden.Append(&g.ReferenceGrants, doc)
	case "BackendTLSPolicy":
		err = golden.Append(&g.BackendTLSPolicies, doc)
	case "ConfigMap":
		err = golden.Append(&g.ConfigMaps, doc)
		o := g.ConfigMaps[len(g.ConfigMaps)-1]
		for k, v := range o.Data {
			o.Data[k] = strings.ReplaceAll(v, "{{cert}}", testKeyPair().cert)
		}
	case "Namespace":
		err = golden.Append(&g.Namespaces, doc)
	case "GatewayOptions":
		var o struct {
			Kind         string `json:"kind"`
			GatewayClass string `json:"gatewayClass"`
			Gateway      string `json:"gateway"`
			HTTPPort     int32  `json:"httpPort"`
			HTTPSPort    int32  `json:"httpsPort"`
			// Addresses: Gateways served apart (Options.Addresses).
			Addresses []netip.Addr `json:"addresses"`
			// Extra listener ports, served apart.
			ExtraHTTPPorts  []int32 `json:"extraHTTPPorts"`
			ExtraHTTPSPorts []int32 `json:"extraHTTPSPorts"`
		}
		err = yaml.UnmarshalStrict(doc, &o)
		opts.Gateway = &gateway.Options{GatewayClass: o.GatewayClass, Gateway: o.Gateway, HTTPPort: o.HTTPPort, HTTPSPort: o.HTTPSPort, Addresses: o.Addresses,
			ExtraHTTPPorts: o.ExtraHTTPPorts, ExtraHTTPSPorts: o.ExtraHTTPSPorts}
	default:
		return false, nil
	}
	return true, err
}

func deepCopyGateway(in GatewayInput) GatewayInput {
	var out GatewayInput
	for _, o := range in.GatewayClasses {
		out.GatewayClasses = append(out.GatewayClasses, o.DeepCopy())
	}
	for _, o := range in.Gateways {
		out.Gateways = append(out.Gateways, o.DeepCopy())
	}
	for _, o := range in.HTTPRoutes {
		out.HTTPRoutes = append(out.HTTPRoutes, o.DeepCopy())
	}
	for _, o := range in.GRPCRoutes {
		out.GRPCRoutes = append(out.GRPCRoutes, o.DeepCopy())
	}
	for _, o := range in.ReferenceGrants {
		out.ReferenceGrants = append(out.ReferenceGrants, o.DeepCopy())
	}
	for _, o := range in.Namespaces {
		out.Namespaces = append(out.Namespaces, o.DeepCopy())
	}
	for _, o := range in.BackendTLSPolicies {
		out.BackendTLSPolicies = append(out.BackendTLSPolicies, o.DeepCopy())
	}
	for _, o := range in.ConfigMaps {
		out.ConfigMaps = append(out.ConfigMaps, o.DeepCopy())
	}
	return out
}

func shuffleGateway(rng *rand.Rand, in *GatewayInput) {
	shuffle(rng, in.GatewayClasses)
	shuffle(rng, in.Gateways)
	shuffle(rng, in.HTTPRoutes)
	shuffle(rng, in.GRPCRoutes)
	shuffle(rng, in.ReferenceGrants)
	shuffle(rng, in.Namespaces)
	shuffle(rng, in.BackendTLSPolicies)
	shuffle(rng, in.ConfigMaps)
}
