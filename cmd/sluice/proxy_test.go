package main

import (
	"bytes"
	"io"
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
	if retriesOption(0) >= 0 || retriesOption(3) != 3 {
		t.Error("--retries 0 must map to no retries")
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
