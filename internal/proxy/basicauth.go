package proxy

import (
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"

	"sluice.dev/sluice/internal/route"
)

// authView checks HTTP basic credentials against a Secret's htpasswd users
// ({SHA} hashes: SHA-1 is cheap, so no cache of verified credentials is
// needed; every comparison is constant-time).
type authView struct {
	users     map[string][sha1.Size]byte
	challenge []string
	refuse    bool
}

func (p *Proxy) authView(a *route.BasicAuth) *authView {
	v := &authView{refuse: a.Refuse, challenge: []string{"Basic realm=" + strconv.Quote(a.Realm) + `, charset="UTF-8"`}}
	if a.Refuse {
		return v
	}
	v.users = make(map[string][sha1.Size]byte, len(a.Users))
	for user, hash := range a.Users {
		raw, err := base64.StdEncoding.DecodeString(hash[len("{SHA}"):])
		if err != nil || len(raw) != sha1.Size {
			continue
		}
		v.users[user] = [sha1.Size]byte(raw)
	}
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
	want, known := v.users[user]
	if !known {
		want = dummySHA
	}
	got := sha1.Sum([]byte(pass))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1 && known
}
