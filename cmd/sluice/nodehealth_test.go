package main

import (
	"io"
	"strings"
	"testing"
)

func TestParseNodeHealthFlags(t *testing.T) {
	c, err := parseNodeHealthFlags([]string{"--node-name", "n1", "--namespace", "ingress", "--selector", "app=proxy",
		"--health-address", ":31000", "--detach-value", "", "--min-ready", "2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.nodeName != "n1" || c.namespace != "ingress" || c.selector.String() != "app=proxy" || c.healthAddress != ":31000" ||
		c.rules.DetachAnnotation != "ingress-daemonset-controller/detach" || c.rules.DetachValue != "" ||
		c.rules.UpdatePendingAnnotation != "sluice.dev/update-pending" || c.rules.MinReady != 2 {
		t.Errorf("parsed %+v", c)
	}
	for _, bad := range [][]string{
		{"--namespace", "x", "--selector", "app=p"},                                      // no node
		{"--node-name", "n1", "--namespace", "x"},                                        // no selector
		{"--node-name", "n1", "--namespace", "x", "--selector", "app in ("},              // bad selector
		{"--node-name", "n1", "--namespace", "x", "--selector", "a=b", "--min-ready=-1"}, // negative
		{"--node-name", "n1", "--namespace", "x", "--selector", "a=b", "--health-address", "31000"},
		{"--node-name", "n1", "--namespace", "x", "--selector", "a=b", "--health-address", ""},
	} {
		t.Setenv("NODE_NAME", "")
		if _, err := parseNodeHealthFlags(bad, io.Discard); err == nil {
			t.Errorf("%s: no error", strings.Join(bad, " "))
		}
	}
}
