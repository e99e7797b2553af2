package main

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseProxyFlags(t *testing.T) {
	c, err := parseProxyFlags([]string{"--manifests", "dir", "--trusted-proxies", "10.0.0.0/8, 192.168.1.1", "--proxy-protocol", "--drain-max-wait", "0", "--reuse-port", "--allow-encoded-slashes"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.reusePort {
		t.Error("--reuse-port not parsed")
	}
	if !c.allowEncodedSlashes {
		t.Error("--allow-encoded-slashes not parsed")
	}
	if len(c.trustedProxies) != 2 || c.trustedProxies[1].String() != "192.168.1.1/32" {
		t.Errorf("trusted proxies = %v", c.trustedProxies)
	}
	if zeroMeansNone(c.drainMaxWait) >= 0 || zeroMeansNone(time.Second) != time.Second {
		t.Error("--drain-max-wait 0 must map to no draining")
	}
	if countOption(0) >= 0 || countOption(3) != 3 {
		t.Error("--retries 0 must map to no retries")
	}
	if c.upstreamIdle >= 4*time.Second || c.maxConns <= 0 || c.queueTimeout <= 0 || c.unsafeReuse <= 0 {
		t.Errorf("upstream defaults: idle %v (want below 4s), max connections %d, queue %v, unsafe reuse %v (want all on)",
			c.upstreamIdle, c.maxConns, c.queueTimeout, c.unsafeReuse)
	}
}

func TestParseProxyIngressClasses(t *testing.T) {
	c, err := parseProxyFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.ingressClasses) != 0 || c.allowEndpointsWithoutPod || c.allowLoopbackEndpoints {
		t.Errorf("defaults: classes %q, without pod %t, loopback %t; want none, false, false", c.ingressClasses, c.allowEndpointsWithoutPod, c.allowLoopbackEndpoints)
	}
	c, err = parseProxyFlags([]string{"--ingress-class", "internal", "--ingress-class", "a, b.example,internal",
		"--manifests", "dir", "--allow-loopback-endpoints", "--allow-endpoints-without-pod"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.ingressClasses, " "); got != "internal a b.example" {
		t.Errorf("--ingress-class repeated and listed = %q, want %q", got, "internal a b.example")
	}
	if !c.allowLoopbackEndpoints || !c.allowEndpointsWithoutPod {
		t.Error("--allow-loopback-endpoints or --allow-endpoints-without-pod not parsed")
	}
}

func TestParseProxyFlagsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--proxy-protocol"}, "needs --trusted-proxies"},
		{[]string{"--trusted-proxies", "nonsense"}, "--trusted-proxies"},
		{[]string{"--manifests", "a", "--kubeconfig", "b"}, "exclusive"},
		{[]string{"--log-format", "xml"}, "--log-format"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--retries", "-1"}, "--retries"},
		{[]string{"--upstream-idle-timeout", "0s"}, "--upstream-idle-timeout"},
		{[]string{"--upstream-unsafe-reuse-window", "-1s"}, "--upstream-unsafe-reuse-window"},
		{[]string{"--upstream-max-connections", "-1"}, "--upstream-max-connections"},
		{[]string{"--upstream-queue-timeout", "0s"}, "--upstream-queue-timeout"},
		{[]string{"--shutdown-timeout", "-1s"}, "negative"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"--ingress-class", ""}, "IngressClass name"},
		{[]string{"--ingress-class", "a,,b"}, "IngressClass name"},
		{[]string{"--ingress-class", "Bad_Name"}, "IngressClass name"},
		{[]string{"--allow-loopback-endpoints"}, "needs --manifests"},
		{[]string{"--watch-namespace", "apps,Bad_NS"}, "--watch-namespace"},
	} {
		_, err := parseProxyFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseProxyFlags(%q) error = %v, want it to mention %q", tc.args, err, tc.want)
		}
	}
}

func TestDispatch(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch([]string{"version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "sluice ") {
		t.Errorf("version: code %d, out %q", code, out.String())
	}
	for _, flag := range []string{"--version", "-version", "-v"} {
		out.Reset()
		if code := dispatch([]string{flag}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "sluice ") {
			t.Errorf("%s: code %d, out %q", flag, code, out.String())
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"remove-bindings", "--namespace", "x"}, "--selector is required"},
		{[]string{"remove-bindings", "--namespace", "x", "--selector", "a in (b"}, "--selector: "},
		{[]string{"remove-bindings", "--namespace", "x", "--selector", "a=b", "--timeout", "0s"}, "--timeout must be positive"},
	} {
		errb.Reset()
		if code := dispatch(tc.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) || strings.Contains(errb.String(), "<nil>") {
			t.Errorf("%v: code %d, err %q, want %q", tc.args, code, errb.String(), tc.want)
		}
	}
	if code := dispatch([]string{"nope"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "unknown command") {
		t.Errorf("unknown command: code %d, err %q", code, errb.String())
	}
	if code := dispatch(nil, &out, &errb); code != 2 {
		t.Errorf("no command: code %d", code)
	}
}

// --watch-namespace takes one namespace or a comma-separated list; "*" or
// nothing means every namespace.
func TestWatchNamespaces(t *testing.T) {
	for arg, want := range map[string][]string{"": nil, "apps": {"apps"}, "apps, web,": {"apps", "web"}, "*": nil} {
		c, err := parseProxyFlags([]string{"--watch-namespace=" + arg}, io.Discard)
		if err != nil || !slices.Equal(c.namespaces, want) {
			t.Errorf("--watch-namespace=%q: %q %v, want %q", arg, c.namespaces, err, want)
		}
	}
}
