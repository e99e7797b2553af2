package chart

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// hasArg reports whether workload o's first container has argument a.
func hasArg(o map[string]any, a string) bool {
	return slices.ContainsFunc(proxyArgs(o), func(x any) bool { return x == a })
}

// TestGatewayAPI: off by default (no flag, GatewayClass or RBAC for it);
// on, the controller gets --gateway-api, one fleet --gateway-class (the
// default fleet, or the fleet of gatewayAPI.binding), and the GatewayClass
// names that binding.
func TestGatewayAPI(t *testing.T) {
	objs := objects(t)
	if find(objs, "GatewayClass", "sluice") != nil || find(objs, "ClusterRole", "sluice-proxy-gateway") != nil {
		t.Error("Gateway API objects rendered by default")
	}
	if hasArg(find(objs, "Deployment", "sluice-controller"), "--gateway-api") || hasArg(find(objs, "Deployment", "sluice-proxy"), "--gateway-class=sluice") {
		t.Error("Gateway API flags by default")
	}

	objs = objects(t, "--set", "gatewayAPI.enabled=true,gatewayAPI.httpPort=8080")
	gc := find(objs, "GatewayClass", "sluice")
	if gc == nil || path(gc, "spec", "controllerName") != "sluice.dev/gateway-controller" || path(gc, "spec", "parametersRef") != nil {
		t.Errorf("GatewayClass = %v", gc)
	}
	if !hasArg(find(objs, "Deployment", "sluice-controller"), "--gateway-api") {
		t.Error("controller without --gateway-api")
	}
	proxy := find(objs, "Deployment", "sluice-proxy")
	if !hasArg(proxy, "--gateway-class=sluice") || !hasArg(proxy, "--gateway-http-port=8080") || !hasArg(proxy, "--gateway-https-port=443") {
		t.Errorf("proxy args = %v", proxyArgs(proxy))
	}

	objs = objects(t, "-f", "testdata/fleets.values.yaml", "--set", "gatewayAPI.enabled=true,gatewayAPI.binding=internet,gatewayAPI.gatewayClass=public")
	n := 0
	for _, o := range objs {
		if k := o["kind"]; (k == "Deployment" || k == "DaemonSet") && hasArg(o, "--gateway-class=public") {
			n++
			if name := path(o, "metadata", "name"); name != "sluice-proxy-internet" {
				t.Errorf("%v serves the GatewayClass of binding internet", name)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d fleets serve the GatewayClass, want 1", n)
	}
	if gc := find(objs, "GatewayClass", "public"); path(gc, "spec", "parametersRef", "name") != "internet" {
		t.Errorf("GatewayClass parametersRef = %v", path(gc, "spec", "parametersRef"))
	}
	for _, o := range objs {
		if slices.ContainsFunc(proxyArgs(o), func(x any) bool { s, _ := x.(string); return strings.HasPrefix(s, "--gateway-addresses") }) {
			t.Errorf("%v has --gateway-addresses without a binding's gatewayAddresses", path(o, "metadata", "name"))
		}
	}

	// The binding's gatewayAddresses reach the binding and the proxies of
	// the class (only them).
	objs = objects(t, "-f", "testdata/fleets.values.yaml", "--set", "gatewayAPI.enabled=true,gatewayAPI.binding=internet,bindings[0].gatewayAddresses={192.0.2.10,192.0.2.11}")
	if got := path(find(objs, "LoadBalancerBinding", "internet"), "spec", "gatewayAddresses"); !reflect.DeepEqual(got, []any{"192.0.2.10", "192.0.2.11"}) {
		t.Errorf("binding gatewayAddresses = %v", got)
	}
	if !hasArg(find(objs, "Deployment", "sluice-proxy-internet"), "--gateway-addresses=192.0.2.10,192.0.2.11") {
		t.Errorf("internet proxy args = %v", proxyArgs(find(objs, "Deployment", "sluice-proxy-internet")))
	}
	if hasArg(find(objs, "Deployment", "sluice-proxy-internal"), "--gateway-addresses=192.0.2.10,192.0.2.11") {
		t.Error("the internal fleet got the internet binding's gateway addresses")
	}

	// One Gateway per fleet.
	objs = objects(t, "--set", "gatewayAPI.enabled=true,gatewayAPI.gateway=infra/web")
	if !hasArg(find(objs, "Deployment", "sluice-proxy"), "--gateway=infra/web") {
		t.Errorf("proxy args = %v", proxyArgs(find(objs, "Deployment", "sluice-proxy")))
	}

	// Extra listener ports reach the proxies and the controller alike.
	objs = objects(t, "--set", "gatewayAPI.enabled=true,gatewayAPI.extraHTTPPorts=8000-8099,gatewayAPI.extraHTTPSPorts=8443")
	for _, name := range []string{"sluice-proxy", "sluice-controller"} {
		o := find(objs, "Deployment", name)
		if !hasArg(o, "--gateway-extra-http-ports=8000-8099") || !hasArg(o, "--gateway-extra-https-ports=8443") {
			t.Errorf("%s args = %v", name, proxyArgs(o))
		}
	}
}
