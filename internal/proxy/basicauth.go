package proxy

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"sluice.dev/sluice/internal/route"
)

// authView checks HTTP basic credentials against a Secret's htpasswd users:
// {SHA} hashes (cheap) and $apr1$ ones (1000 rounds of MD5, about 0.2 ms:
// the credentials verified are cached per Secret revision, so a user's
// requests cost that once). Hash comparisons are constant-time.
type authView struct {
	users     map[string]credential
	cache     *credCache
	challenge []string
	refuse    bool
}

// credential is one user's hash: sha, or apr1 (the full "$apr1$..." text).
type credential struct {
	sha  [sha1.Size]byte
	apr1 string
}

// credCache remembers verified credentials (a SHA-256 of user and
// password) of one Secret revision; at most maxCachedCreds, then it starts
// afresh.
type credCache struct {
	mu sync.Mutex
	ok map[[sha256.Size]byte]bool
}

const maxCachedCreds = 1024

func (p *Proxy) authView(a *route.BasicAuth) *authView {
	v := &authView{refuse: a.Refuse, challenge: []string{"Basic realm=" + strconv.Quote(a.Realm) + `, charset="UTF-8"`}}
	if a.Refuse {
		return v
	}
	v.users = make(map[string]credential, len(a.Users))
	for user, hash := range a.Users {
		if strings.HasPrefix(hash, "$apr1$") {
			v.users[user] = credential{apr1: hash}
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(hash, "{SHA}"))
		if err != nil || len(raw) != sha1.Size {
			continue
		}
		v.users[user] = credential{sha: [sha1.Size]byte(raw)}
	}
	v.cache = p.credCache(a.Secret + "@" + a.Revision)
	if len(v.users) == 0 {
		v.refuse = true
	}
	return v
}

// dummySHA is compared against when the user is unknown, so that an
// unknown user costs the same as a wrong password.
var dummySHA [sha1.Size]byte

// verify reports whether r carries the credentials of a user.
func (v *authView) verify(r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return false
	}
	c, known := v.users[user]
	if known && c.apr1 != "" {
		return v.verifyAPR1(user, pass, c.apr1)
	}
	want := c.sha
	if !known {
		want = dummySHA
	}
	got := sha1.Sum([]byte(pass))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1 && known
}

func (v *authView) verifyAPR1(user, pass, hash string) bool {
	key := sha256.Sum256([]byte(user + "\x00" + pass))
	v.cache.mu.Lock()
	hit := v.cache.ok[key]
	v.cache.mu.Unlock()
	if hit {
		return true
	}
	salt, _, ok := strings.Cut(hash[len("$apr1$"):], "$")
	if !ok {
		return false
	}
	if subtle.ConstantTimeCompare([]byte(apr1(pass, salt)), []byte(hash)) != 1 {
		return false
	}
	v.cache.mu.Lock()
	if len(v.cache.ok) >= maxCachedCreds {
		clear(v.cache.ok)
	}
	v.cache.ok[key] = true
	v.cache.mu.Unlock()
	return true
}

// credCache returns the cache of verified credentials of a Secret
// revision, the previous table's when it is the same. Called under p.mu
// from Update.
func (p *Proxy) credCache(key string) *credCache {
	if p.pol.creds == nil {
		p.pol.creds = make(map[string]*credCache)
	}
	if p.pol.usedCreds == nil {
		p.pol.usedCreds = make(map[string]bool)
	}
	p.pol.usedCreds[key] = true
	c := p.pol.creds[key]
	if c == nil {
		c = &credCache{ok: make(map[[sha256.Size]byte]bool)}
		p.pol.creds[key] = c
	}
	return c
}
