package translate

import (
	"maps"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

func TestNginxPolicyAnnotations(t *testing.T) {
	n := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name string
		in   map[string]string
		want map[string]string
	}{
		{"source ranges", n(NginxPrefix+"whitelist-source-range", "10.0.0.0/8", NginxPrefix+"denylist-source-range", "10.9.0.0/16"),
			n(AnnotationAllowSourceRange, "10.0.0.0/8", AnnotationDenySourceRange, "10.9.0.0/16")},
		{"allowlist wins", n(NginxPrefix+"whitelist-source-range", "10.0.0.0/8", NginxPrefix+"allowlist-source-range", "192.0.2.0/24"),
			n(AnnotationAllowSourceRange, "192.0.2.0/24")},
		{"body size", n(NginxPrefix+"proxy-body-size", "8m"), n(AnnotationMaxBodySize, "8m")},
		{"cors defaults", n(NginxPrefix+"enable-cors", "true"),
			n(AnnotationCORSEnable, "true", AnnotationCORSAllowOrigin, "*", AnnotationCORSMaxAge, "1728000")},
		{"cors credentials by default with listed origins", n(NginxPrefix+"enable-cors", "true", NginxPrefix+"cors-allow-origin", "https://a.example.com"),
			n(AnnotationCORSEnable, "true", AnnotationCORSAllowOrigin, "https://a.example.com", AnnotationCORSMaxAge, "1728000", AnnotationCORSAllowCredentials, "true")},
		{"rps with the default multiplier", n(NginxPrefix+"limit-rps", "5"),
			n(AnnotationLimitRPS, "5", AnnotationLimitBurst, "25", AnnotationLimitStatus, "503")},
		{"rpm with a multiplier", n(NginxPrefix+"limit-rpm", "60", NginxPrefix+"limit-burst-multiplier", "2", NginxPrefix+"limit-whitelist", "10.0.0.0/8"),
			n(AnnotationLimitRPM, "60", AnnotationLimitBurst, "120", AnnotationLimitStatus, "503", AnnotationLimitExemptSourceRange, "10.0.0.0/8")},
		{"connections", n(NginxPrefix+"limit-connections", "3"), n(AnnotationLimitConnections, "3", AnnotationLimitStatus, "503")},
		{"multiplier alone", n(NginxPrefix+"limit-burst-multiplier", "3"), n()},
		{"basic auth", n(NginxPrefix+"auth-type", "basic", NginxPrefix+"auth-secret", "users", NginxPrefix+"auth-realm", "Staff"),
			n(AnnotationAuthType, "basic", AnnotationAuthSecret, "users", AnnotationAuthRealm, "Staff")},
		{"auth-map fails closed", n(NginxPrefix+"auth-type", "basic", NginxPrefix+"auth-secret", "users", NginxPrefix+"auth-secret-type", "auth-map"),
			n(AnnotationAuthType, "auth-map", AnnotationAuthSecret, "users")},
		{"sluice.dev wins", n(NginxPrefix+"proxy-body-size", "8m", AnnotationMaxBodySize, "1k"), n(AnnotationMaxBodySize, "1k")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NginxPolicyAnnotations(tc.in); !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNginxPolicyTable(t *testing.T) {
	names := make([]string, len(NginxPolicyTable))
	for i, m := range NginxPolicyTable {
		names[i] = m.Nginx
		if (m.Sluice == "") != (m.Support == NginxPolicyUnsupported) && m.Nginx != "auth-secret-type" {
			t.Errorf("%s: sluice annotation %q with support %s", m.Nginx, m.Sluice, m.Support)
		}
		if m.Support != NginxPolicySame && m.Note == "" {
			t.Errorf("%s: %s without a note", m.Nginx, m.Support)
		}
		if m.Sluice != "" && !strings.HasPrefix(m.Sluice, "sluice.dev/") {
			t.Errorf("%s: %q", m.Nginx, m.Sluice)
		}
	}
	if !slices.IsSorted(names) {
		t.Error("table not sorted by nginx name")
	}
}

// FuzzNginxPolicy converts arbitrary ingress-nginx policy annotations and
// builds the result: no panic, valid policies.
func FuzzNginxPolicy(f *testing.F) {
	f.Add(uint32(0xffffffff), "5", "10.0.0.0/8", "true", "8m")
	f.Add(uint32(0x0000f0f0), "999999999999", "x", "false", "-1")
	f.Add(uint32(0x00ff00ff), "0", "", "yes", "1g")
	f.Fuzz(func(t *testing.T, set uint32, number, cidrs, flag, size string) {
		ann := map[string]string{}
		for i, m := range NginxPolicyTable {
			if set&(1<<(i%32)) == 0 {
				continue
			}
			v := number
			switch {
			case strings.Contains(m.Nginx, "range") || m.Nginx == "limit-whitelist" || strings.HasPrefix(m.Nginx, "cors"):
				v = cidrs
			case m.Nginx == "enable-cors" || m.Nginx == "auth-type":
				v = flag
			case m.Nginx == "proxy-body-size":
				v = size
			}
			ann[NginxPrefix+m.Nginx] = v
		}
		conv := NginxPolicyAnnotations(ann)
		ing := fuzzIngress("annotated", "a.example.com", "/", networkingv1.PathTypePrefix, "", 80)
		ing.Annotations = conv
		cfg, _ := Build(Input{Ingresses: []*networkingv1.Ingress{ing}}, Options{})
		for _, vh := range cfg.VirtualHosts {
			for _, rt := range vh.Routes {
				checkPolicies(t, rt.Policies)
			}
		}
	})
}
