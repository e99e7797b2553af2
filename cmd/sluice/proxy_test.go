package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseProxyFlags(t *testing.T) {
	c, err := parseProxyFlags([]string{"--manifests", "dir", "--trusted-proxies", "10.0.0.0/8, 192.168.1.1", "--proxy-protocol", "--drain-max-wait", "0", "--reuse-port"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.reusePort {
		t.Error("--reuse-port not parsed")
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
	if code := dispatch([]string{"nope"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "unknown command") {
		t.Errorf("unknown command: code %d, err %q", code, errb.String())
	}
	if code := dispatch(nil, &out, &errb); code != 2 {
		t.Errorf("no command: code %d", code)
	}
}
