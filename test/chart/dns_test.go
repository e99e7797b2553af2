package chart

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// DNS values become the controller's --dns-* and --rfc2136-* flags, with
// the ownership key and the TSIG secret mounted from their Secrets; no
// provider, no flags and no volumes.
func TestDNSValues(t *testing.T) {
	objs := objects(t, "--set", "controller.dns.provider=rfc2136,controller.dns.zones[0]=example.com,controller.dns.zones[1]=example.org,"+
		"controller.dns.ownerID=prod-eu,controller.dns.ownershipKeySecret.name=dns-ownership,controller.dns.allowApex=true,"+
		"controller.dns.rfc2136.server=ns1.example.com:53,controller.dns.rfc2136.tsigKeyName=sluice,controller.dns.rfc2136.tsigSecret.name=tsig",
		"--set-json", `controller.dns.namespaceDomains={"team-a":["a.example.com","*.a.example.com"],"team-b":["b.example.com"]}`)
	pod := path(find(objs, "Deployment", "sluice-controller"), "spec", "template", "spec")
	c := path(pod, "containers").([]any)[0].(map[string]any)
	args := c["args"].([]any)
	for _, want := range []string{"--dns-provider=rfc2136", "--dns-zone=example.com", "--dns-zone=example.org", "--dns-owner-id=prod-eu",
		"--dns-ownership-key-file=/etc/sluice/dns-ownership/keys", "--dns-allow-apex",
		"--dns-namespace-domains=team-a=a.example.com,*.a.example.com", "--dns-namespace-domains=team-b=b.example.com",
		"--rfc2136-server=ns1.example.com:53", "--rfc2136-tsig-key-name=sluice", "--rfc2136-tsig-secret-file=/etc/sluice/rfc2136-tsig/secret"} {
		if !slices.Contains(args, any(want)) {
			t.Errorf("controller args %v lack %s", args, want)
		}
	}
	if slices.Contains(args, any("--dns-adopt-unsigned")) {
		t.Error("--dns-adopt-unsigned without controller.dns.adoptUnsigned")
	}
	if got := fmt.Sprint(path(pod, "volumes")); !strings.Contains(got, "secretName:dns-ownership") || !strings.Contains(got, "secretName:tsig") {
		t.Errorf("volumes = %s, want the ownership key and TSIG Secrets", got)
	}
	if got := fmt.Sprint(c["volumeMounts"]); !strings.Contains(got, "/etc/sluice/dns-ownership") || !strings.Contains(got, "/etc/sluice/rfc2136-tsig") {
		t.Errorf("volumeMounts = %s", got)
	}

	pod = path(find(objects(t), "Deployment", "sluice-controller"), "spec", "template", "spec")
	c = path(pod, "containers").([]any)[0].(map[string]any)
	if got := fmt.Sprint(c["args"]); strings.Contains(got, "--dns-") || path(pod, "volumes") != nil || c["volumeMounts"] != nil {
		t.Errorf("DNS off, yet args %s, volumes %v, mounts %v", got, path(pod, "volumes"), c["volumeMounts"])
	}

	for set, want := range map[string]string{
		"controller.dns.provider=route53,controller.dns.zones[0]=Z1,controller.dns.ownerID=a":               "ownershipKeySecret.name is required",
		"controller.dns.provider=route53,controller.dns.ownershipKeySecret.name=k":                          "ownerID is required",
		"controller.dns.provider=rfc2136,controller.dns.ownerID=a,controller.dns.ownershipKeySecret.name=k": "rfc2136.server is required",
		"controller.dns.provider=bind": "provider",
		"controller.dns.provider=route53,controller.dns.ownerID=a;b,controller.dns.ownershipKeySecret.name=k":                                                                       "ownerID",
		"controller.dns.provider=rfc2136,controller.dns.ownerID=a,controller.dns.ownershipKeySecret.name=k,controller.dns.rfc2136.server=x:53,controller.dns.rfc2136.tsigKeyName=s": "tsigSecret.name is required",
	} {
		out, err := template(t, "--set", set)
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("--set %s: err %v, output lacks %q:\n%s", set, err, want, out)
		}
	}
}
