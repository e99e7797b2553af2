package translate

import (
	"slices"
	"strings"
	"testing"
)

// TestNginxLookupAgreesWithTranslation: what NginxLookup (and so `sluice
// migrate` and the migration guide) says of each annotation is what
// nginxToNative does with it: refused, listed as unsupported, or served
// through the sluice.dev annotation named.
func TestNginxLookupAgreesWithTranslation(t *testing.T) {
	names := []string{"some-future-snippet", "lua-resty-waf", "ssl-redirect", "affinity", "Limit-RPS"}
	entries := NginxEntries()
	if !slices.IsSortedFunc(entries, func(a, b NginxEntry) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("NginxEntries is not sorted")
	}
	for i, e := range entries {
		if i > 0 && entries[i-1].Name == e.Name {
			t.Errorf("%s twice", e.Name)
		}
		if e != NginxLookup(e.Name) {
			t.Errorf("%s: entry %+v, lookup %+v", e.Name, e, NginxLookup(e.Name))
		}
		if e.Support == NginxPolicyDifferent && e.Note == "" {
			t.Errorf("%s: a difference without a note", e.Name)
		}
		names = append(names, e.Name)
	}
	for _, n := range names {
		e := NginxLookup(n)
		key := NginxAnnotationPrefix + n
		// With limit-rps set, which limit-burst-multiplier needs.
		out, res := nginxToNative(map[string]string{NginxAnnotationPrefix + "limit-rps": "10", key: "1"})
		refused, unsupported := slices.Contains(res.refused, key), slices.Contains(res.unsupported, key)
		switch e.Support {
		case NginxSnippetRefused:
			if !refused || unsupported {
				t.Errorf("%s: lookup refused, translation %+v", n, res)
			}
		case NginxPolicyUnsupported:
			if !unsupported || refused {
				t.Errorf("%s: lookup unsupported, translation %+v", n, res)
			}
		case NginxPolicySame, NginxPolicyDifferent:
			if refused || unsupported {
				t.Errorf("%s: lookup %s, translation %+v", n, e.Support, res)
			}
			if _, ok := out[e.Native]; e.Native != "" && !ok {
				t.Errorf("%s: lookup names %s, translation gives %v", n, e.Native, out)
			}
		default:
			t.Errorf("%s: support %q", n, e.Support)
		}
	}
}

// TestNginxInvalid: the nginx annotations whose value the translation
// refuses, and only those whose value is the one read.
func TestNginxInvalid(t *testing.T) {
	p := NginxAnnotationPrefix
	for _, tc := range []struct {
		ann  map[string]string
		want string
	}{
		{map[string]string{p + "limit-rps": "10", p + "enable-cors": "true", p + "proxy-body-size": "8m"}, ""},
		{map[string]string{p + "limit-rps": "lots", p + "proxy-body-size": "8m"}, p + "limit-rps"},
		{map[string]string{p + "limit-rps": "lots", AnnotationLimitRPS: "5"}, ""}, // the native one is read
		{map[string]string{p + "whitelist-source-range": "office", p + "allowlist-source-range": "10.0.0.0/8"}, ""},
		{map[string]string{p + "allowlist-source-range": "office"}, p + "allowlist-source-range"},
		{map[string]string{p + "proxy-send-timeout": "-3", p + "rewrite-target": "/$host"}, p + "proxy-send-timeout," + p + "rewrite-target"},
		{map[string]string{p + "server-snippet": "x", p + "ssl-redirect": "maybe"}, ""}, // refused and unsupported are not invalid
	} {
		if got := strings.Join(NginxInvalid(tc.ann), ","); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.ann, got, tc.want)
		}
	}
}
