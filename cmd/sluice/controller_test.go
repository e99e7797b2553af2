package main

import (
	"io"
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
