package route

import (
	"net/netip"
	"testing"
)

// TestScopeFor: a scoped address, a scoped port, both, neither; a scoped
// address or port without a scope of its own gets the empty table, never
// the shared one.
func TestScopeFor(t *testing.T) {
	be := func(name string) *Backend { return &Backend{Name: name} }
	table := func(name string) Config {
		return Config{VirtualHosts: []VirtualHost{{Host: "", Routes: []Route{{PathType: PathPrefix, Path: "/", Backend: be(name)}}}}}
	}
	a := netip.MustParseAddr("192.0.2.10")
	b := netip.MustParseAddr("192.0.2.11")
	cfg := table("shared")
	cfg.ScopedPorts = []uint16{8080, 8090}
	cfg.Scopes = []Scope{
		{Port: 8080, Config: table("shared-8080")},
		{Address: a, Config: table("a")},
		{Address: a, Port: 8080, Config: table("a-8080")},
		{Address: b, Config: Config{}},
		{Port: 9999, Config: table("not a scoped port")},
	}
	tbl := New(cfg)
	tests := []struct {
		at   string
		want string // "" for 404
	}{
		{"198.51.100.1:80", "shared"},
		{"198.51.100.1:0", "shared"},
		{"198.51.100.1:8080", "shared-8080"},
		{"198.51.100.1:8090", ""},
		{"198.51.100.1:9999", "shared"}, // not a scoped port: main
		{"192.0.2.10:80", "a"},
		{"192.0.2.10:8080", "a-8080"},
		{"192.0.2.10:8090", ""},
		{"[::ffff:192.0.2.10]:80", "a"},
		{"192.0.2.11:80", ""},
		{"192.0.2.11:8080", ""},
	}
	for _, tt := range tests {
		got := ""
		if r := tbl.For(netip.MustParseAddrPort(tt.at)).Match("example.com", "/x"); r != nil {
			got = r.Backend.Name
		}
		if got != tt.want {
			t.Errorf("at %s: got %q, want %q", tt.at, got, tt.want)
		}
	}
	if got := len(tbl.Scopes()); got != 4 {
		t.Errorf("Scopes() = %d tables, want 4 (the one on an unscoped port dropped)", got)
	}
	if New(table("x")).HasScopes() || !tbl.HasScopes() {
		t.Error("HasScopes wrong")
	}
	// A rebuild reuses a scope's compiled hosts.
	again := NewFrom(tbl, cfg)
	if again.For(netip.MustParseAddrPort("192.0.2.10:80")).catchAll != tbl.For(netip.MustParseAddrPort("192.0.2.10:80")).catchAll {
		t.Error("scope not reused by NewFrom")
	}
}
