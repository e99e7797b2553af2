package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"sluice.dev/sluice/internal/gateway"
)

// maxExtraGatewayPorts bounds --gateway-extra-http(s)-ports together.
const maxExtraGatewayPorts = 1024

// gatewayPortFlags are the extra Gateway listener ports, the same on the
// proxies and the controller.
type gatewayPortFlags struct {
	httpFlag, httpsFlag string
	http, https         []int32
}

// declare adds --gateway-extra-http-ports and --gateway-extra-https-ports
// to fs; prefix starts their help ("as the proxies' flag: " on the
// controller).
func (g *gatewayPortFlags) declare(fs *flagSet, prefix string) {
	fs.StringVar(&g.httpFlag, "gateway-extra-http-ports", "", prefix+"more ports Gateway HTTP listeners may name, as a list of ports and ranges (8080,8000-8099): ports the load balancer exposes and forwards to the proxies' plain port with a PROXY protocol header (--proxy-protocol), whose destination port says which one; a listener on one is served only to requests that reached it")
	fs.StringVar(&g.httpsFlag, "gateway-extra-https-ports", "", prefix+"as --gateway-extra-http-ports, for HTTPS listeners: ports forwarded to the proxies' TLS port")
}

// check parses the flags; main are the --gateway-http-port and
// --gateway-https-port values, which no extra port may repeat.
func (g *gatewayPortFlags) check(mainHTTP, mainHTTPS int) error {
	var err error
	if g.http, err = parsePortList(g.httpFlag); err != nil {
		return fmt.Errorf("--gateway-extra-http-ports: %w", err)
	}
	if g.https, err = parsePortList(g.httpsFlag); err != nil {
		return fmt.Errorf("--gateway-extra-https-ports: %w", err)
	}
	if len(g.http)+len(g.https) > maxExtraGatewayPorts {
		return fmt.Errorf("--gateway-extra-http-ports and --gateway-extra-https-ports name %d ports; at most %d", len(g.http)+len(g.https), maxExtraGatewayPorts)
	}
	for _, p := range g.http {
		if slices.Contains(g.https, p) {
			return fmt.Errorf("port %d is in both --gateway-extra-http-ports and --gateway-extra-https-ports", p)
		}
	}
	for _, p := range slices.Concat(g.http, g.https) {
		if int(p) == mainHTTP || int(p) == mainHTTPS {
			return fmt.Errorf("extra Gateway port %d is --gateway-http-port or --gateway-https-port already", p)
		}
	}
	return nil
}

// apply sets the extra ports of o.
func (g *gatewayPortFlags) apply(o *gateway.Options) {
	o.ExtraHTTPPorts, o.ExtraHTTPSPorts = g.http, g.https
}

// parsePortList parses "8080,8000-8099" into sorted ports without
// duplicates; "" is none.
func parsePortList(s string) ([]int32, error) {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(f, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 1 || b > 65535 || a > b {
			return nil, fmt.Errorf("%q is not a port (1-65535) or a range of ports", f)
		}
		if b-a >= maxExtraGatewayPorts {
			return nil, fmt.Errorf("range %q has more than %d ports", f, maxExtraGatewayPorts)
		}
		for p := a; p <= b; p++ {
			out = append(out, int32(p))
		}
		if len(out) > maxExtraGatewayPorts {
			return nil, fmt.Errorf("more than %d ports", maxExtraGatewayPorts)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
