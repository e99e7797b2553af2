package proxy

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"

	"sluice.dev/sluice/internal/route"
	"sluice.dev/sluice/internal/translate"
)

// authView checks HTTP basic credentials against a Secret's htpasswd users:
// {SHA} hashes (cheap), $apr1$ ones (1000 rounds of MD5, about 0.2 ms) and
// bcrypt ones (2^cost rounds, cost at most translate.MaxBcryptCost: up to
// about 0.25 s of CPU). The credentials verified are cached per Secret
// revision, so a valid user's requests pay the hash once; checks of
// bcrypt hashes run at most GOMAXPROCS at a time (bcryptSlots), so wrong
// passwords sent in a flood cannot take every core. Hash comparisons are
// constant-time.
type authView struct {
	users     map[string]credential
	cache     *credCache
	challenge []string
	refuse    bool
	// slots bounds the bcrypt checks running at once (the proxy's).
	slots chan struct{}
}

// credential is one user's hash: sha, or apr1 (the full "$apr1$..."
// text), or bcrypt (the full "$2y$..." text).
type credential struct {
	sha    [sha1.Size]byte
	apr1   string
	bcrypt []byte
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
		if strings.HasPrefix(hash, "$2") {
			if cost, err := bcrypt.Cost([]byte(hash)); err == nil && cost <= translate.MaxBcryptCost {
				v.users[user] = credential{bcrypt: []byte(hash)}
			}
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(hash, "{SHA}"))
		if err != nil || len(raw) != sha1.Size {
			continue
		}
		v.users[user] = credential{sha: [sha1.Size]byte(raw)}
	}
	v.cache = p.credCache(a.Secret + "@" + a.Revision)
	if p.pol.bcryptSlots == nil {
		p.pol.bcryptSlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	}
	v.slots = p.pol.bcryptSlots
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
	if known && c.bcrypt != nil {
		return v.verifyBcrypt(r, user, pass, c.bcrypt)
	}
	want := c.sha
	if !known {
		want = dummySHA
	}
	got := sha1.Sum([]byte(pass))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1 && known
}

func (v *authView) verifyAPR1(user, pass, hash string) bool {
	key, hit := v.cache.lookup(user, pass)
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
	v.cache.add(key)
	return true
}

// verifyBcrypt checks pass against a bcrypt hash, once per user and
// password and Secret revision; a check waits for a slot, or gives up
// when the client goes away.
func (v *authView) verifyBcrypt(r *http.Request, user, pass string, hash []byte) bool {
	key, hit := v.cache.lookup(user, pass)
	if hit {
		return true
	}
	select {
	case v.slots <- struct{}{}:
	case <-r.Context().Done():
		return false
	}
	err := bcrypt.CompareHashAndPassword(hash, []byte(pass))
	<-v.slots
	if err != nil {
		return false
	}
	v.cache.add(key)
	return true
}

// lookup reports whether user and pass were verified before; key is
// what add takes.
func (c *credCache) lookup(user, pass string) (key [sha256.Size]byte, hit bool) {
	key = sha256.Sum256([]byte(user + "\x00" + pass))
	c.mu.Lock()
	hit = c.ok[key]
	c.mu.Unlock()
	return key, hit
}

// add remembers verified credentials.
func (c *credCache) add(key [sha256.Size]byte) {
	c.mu.Lock()
	if len(c.ok) >= maxCachedCreds {
		clear(c.ok)
	}
	c.ok[key] = true
	c.mu.Unlock()
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
