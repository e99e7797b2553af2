package proxy

import (
	"net/http/httptest"
	"testing"

	"sluice.dev/sluice/internal/route"
)

// TestAPR1 checks apr1 against hashes made by `openssl passwd -apr1`.
func TestAPR1(t *testing.T) {
	for _, tc := range []struct{ password, salt, want string }{
		{"secret", "abcdefgh", "$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/"},
		{"secret2", "x", "$apr1$x$3NF2oP7u3ShMadILqom600"},
		{"", "ab", "$apr1$ab$S8K6Sgp3W8c9Jb6LxgywZ."},
		{"a-much-longer-password-than-16-bytes!!", "12345678", "$apr1$12345678$K.7Xav3y57WgUPpkEIgVs/"},
		{"pässwörd", "Zz9", "$apr1$Zz9$xEsVJkldzTq7uQiphj/tj0"},
	} {
		if got := apr1(tc.password, tc.salt); got != tc.want {
			t.Errorf("apr1(%q, %q) = %q, want %q", tc.password, tc.salt, got, tc.want)
		}
	}
}

// TestAPR1Cache: a verified $apr1$ credential is computed once per Secret
// revision; a wrong password is never cached.
func TestAPR1Cache(t *testing.T) {
	p := New(Options{})
	v := p.authView(&route.BasicAuth{Realm: "r", Secret: "ns/s", Revision: "1", Users: map[string]string{"bob": "$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/"}})
	r := httptest.NewRequest("GET", "/", nil)
	r.SetBasicAuth("bob", "wrong")
	if v.verify(r) || len(v.cache.ok) != 0 {
		t.Fatal("wrong password accepted or cached")
	}
	r.SetBasicAuth("bob", "secret")
	if !v.verify(r) || len(v.cache.ok) != 1 || !v.verify(r) {
		t.Fatal("right password refused or not cached")
	}
	p.sweepPolicies() // this view's use
	p.sweepPolicies() // the cache survives only while a table uses it
	if len(p.pol.creds) != 0 {
		t.Error("cache kept after no table used it")
	}
}

func BenchmarkAPR1(b *testing.B) {
	for b.Loop() {
		apr1("secret", "abcdefgh")
	}
}
