package main

import (
	"io"
	"slices"
	"testing"
)

func TestEvictionWebhookFlags(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "sluice-system") // the default of --binding-namespaces
	c, err := parseControllerFlags([]string{"--eviction-webhook-address=:9443", "--eviction-webhook-service=sluice-system/sluice-controller:443"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o := c.webhook()
	if o == nil || o.Service != "sluice-system/sluice-controller:443" || o.CreateConfigurations ||
		o.ConfigName != "sluice-eviction-floor" || o.SteerConfigName != "sluice-zone-steer" ||
		!slices.Equal(o.Hosts, []string{"sluice-controller.sluice-system.svc", "sluice-controller.sluice-system.svc.cluster.local"}) {
		t.Fatalf("service options %+v", o)
	}
	c, err = parseControllerFlags([]string{"--eviction-webhook-address=127.0.0.1:9443", "--eviction-webhook-url=https://127.0.0.1:9443",
		"--eviction-webhook-create-configurations", "--eviction-webhook-configuration=a", "--zone-steer-webhook-configuration=b"}, io.Discard)
	if err != nil || c.webhook() == nil || !slices.Equal(c.webhook().Hosts, []string{"127.0.0.1"}) ||
		!c.webhook().CreateConfigurations || c.webhook().ConfigName != "a" || c.webhook().SteerConfigName != "b" {
		t.Fatalf("url options %+v %v", c, err)
	}
	if c, _ := parseControllerFlags(nil, io.Discard); c.webhook() != nil {
		t.Fatal("webhook on by default")
	}
	for _, args := range [][]string{
		{"--eviction-webhook-address=:9443"},
		{"--eviction-webhook-address=:9443", "--eviction-webhook-url=https://x", "--eviction-webhook-service=a/b"},
		{"--eviction-webhook-configuration="},
	} {
		if _, err := parseControllerFlags(args, io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}
