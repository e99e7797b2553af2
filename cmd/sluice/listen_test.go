package main

import "testing"

func TestListenAddress(t *testing.T) {
	for in, want := range map[string]string{
		":9090":                 ":9090",
		"10.0.0.5:9090":         "10.0.0.5:9090",
		"[fd00::5]:9090":        "[fd00::5]:9090",
		"fd00::5:9090":          "[fd00::5]:9090",
		"fd00:0:0:0:0:0:0:5:80": "[fd00::5]:80",
		"":                      "",
		"0":                     "0",
		"localhost:1":           "localhost:1",
		"not an address":        "not an address",
	} {
		if got := listenAddress(in); got != want {
			t.Errorf("listenAddress(%q) = %q, want %q", in, got, want)
		}
	}
}
