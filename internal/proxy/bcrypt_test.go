package proxy

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"sluice.dev/sluice/internal/route"
)

// TestBasicAuthBcrypt: $2a$, $2b$ and $2y$ hashes through the proxy; a
// hash above the cost bound never logs anyone in.
func TestBasicAuthBcrypt(t *testing.T) {
	h, err := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	a := string(h)
	users := map[string]string{
		"ann":  a,
		"bert": strings.Replace(a, "$2a$", "$2b$", 1),
		"cora": strings.Replace(a, "$2a$", "$2y$", 1),
		"dan":  "$2y$13$" + a[7:], // over the bound: refused whatever the password
	}
	for _, tc := range []struct {
		user, pass string
		want       int
	}{
		{"ann", "secret", 200}, {"bert", "secret", 200}, {"cora", "secret", 200},
		{"cora", "wrong", 401}, {"dan", "secret", 401}, {"nobody", "secret", 401},
	} {
		_, url, c, _ := policyFront(t, Options{}, &route.Policies{BasicAuth: &route.BasicAuth{Realm: "R", Users: users}}, nil)
		req, _ := http.NewRequest("GET", url+"/", nil)
		req.SetBasicAuth(tc.user, tc.pass)
		if res := do(t, c, req); res.status != tc.want {
			t.Errorf("%s/%s: status %d, want %d", tc.user, tc.pass, res.status, tc.want)
		}
	}
}

// TestBcryptCacheAndSlots: a verified password is remembered (a valid
// client pays bcrypt once per Secret revision, even while every slot is
// taken); an unverified one waits for a slot and gives up with its
// client.
func TestBcryptCacheAndSlots(t *testing.T) {
	h, err := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	v := &authView{
		users: map[string]credential{"ann": {bcrypt: h}},
		cache: &credCache{ok: make(map[[sha256.Size]byte]bool)},
		slots: make(chan struct{}, 1),
	}
	req := func(ctx context.Context, pass string) *http.Request {
		r, _ := http.NewRequestWithContext(ctx, "GET", "http://x/", nil)
		r.SetBasicAuth("ann", pass)
		return r
	}
	if !v.verify(req(context.Background(), "secret")) || len(v.cache.ok) != 1 {
		t.Fatalf("first check: cache %d entries", len(v.cache.ok))
	}
	if v.verify(req(context.Background(), "wrong")) || len(v.cache.ok) != 1 {
		t.Fatal("a wrong password passed or was cached")
	}
	v.slots <- struct{}{} // every slot busy
	defer func() { <-v.slots }()
	if !v.verify(req(context.Background(), "secret")) {
		t.Error("a cached password waited for a slot")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if v.verify(req(ctx, "other")) {
		t.Error("an unverified password passed without a slot")
	}
}
