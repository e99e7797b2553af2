package cluster

import (
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	env := envLookup([]string{"POD_IP=10.244.1.2", "EMPTY=", "A=x", "A=y"})
	for _, tc := range []struct{ in, want string }{
		{"--listen=$(POD_IP):8080", "--listen=10.244.1.2:8080"},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(POD_IP)", "$(POD_IP)"},
		{"$$$(POD_IP)", "$10.244.1.2"},
		{"a$(EMPTY)b", "ab"},
		{"$(A)", "y"},
		{"$(POD_IP", "$(POD_IP"},
		{"cost $5", "cost $5"},
		{"end$", "end$"},
		{"$()", "$()"},
		{"ünï$(A)côdé$€", "ünïycôdé$€"},
		{"", ""},
	} {
		if got := expand(tc.in, env); got != tc.want {
			t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"$(A)", "$$", "$(", "a$b", "$(A)$(B)x", "€$(€)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// With no variables known, expansion only unescapes $$.
		none := func(string) (string, bool) { return "", false }
		got := expand(s, none)
		if !strings.Contains(s, "$$") && got != s {
			t.Fatalf("expand(%q) with no variables = %q", s, got)
		}
		// Expanding every variable to itself in $() form is the identity
		// when there is no escape.
		self := func(n string) (string, bool) { return "$(" + n + ")", true }
		if !strings.Contains(s, "$$") && expand(s, self) != s {
			t.Fatalf("self-expansion changed %q", s)
		}
	})
}
