package dns

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// sigVersion opens every signature: the MAC scheme, so a later one can
// be told apart.
const sigVersion = "v1:"

// minKeyBytes is the shortest ownership key Keys accepts.
const minKeyBytes = 16

// maxKeys bounds how many keys a key file may hold.
const maxKeys = 16

// Keys are the ownership keys (--dns-ownership-key-file): the first signs
// every ownership record sluice writes; every one verifies, so a key can
// be rotated without a moment in which sluice's own records look
// foreign. The zero value and nil hold no key: nothing verifies and
// Sign returns "".
type Keys struct {
	keys [][]byte
}

// NewKeys returns Keys holding secrets, the first one signing. Each must
// be at least 16 bytes long (32 random bytes are recommended).
func NewKeys(secrets ...[]byte) (*Keys, error) {
	if len(secrets) == 0 {
		return nil, errors.New("creating ownership keys: no key")
	}
	if len(secrets) > maxKeys {
		return nil, fmt.Errorf("creating ownership keys: %d keys, at most %d", len(secrets), maxKeys)
	}
	k := &Keys{}
	for i, s := range secrets {
		if len(s) < minKeyBytes {
			return nil, fmt.Errorf("creating ownership keys: key %d has %d bytes, at least %d are needed", i+1, len(s), minKeyBytes)
		}
		k.keys = append(k.keys, bytes.Clone(s))
	}
	return k, nil
}

// ParseKeyFile reads an ownership key file: one base64 key a line (e.g.
// `openssl rand -base64 32`), the first signing, the others only
// verifying (previous keys during a rotation). Blank lines and lines
// starting with "#" are ignored.
func ParseKeyFile(data []byte) (*Keys, error) {
	var secrets [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("parsing ownership key file: line %d is not base64: %w", line, err)
		}
		secrets = append(secrets, b)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("parsing ownership key file: %w", err)
	}
	return NewKeys(secrets...)
}

// Len is how many keys k holds.
func (k *Keys) Len() int {
	if k == nil {
		return 0
	}
	return len(k.keys)
}

// Sign returns o with Sig set to the signature, by the first key, of o
// as the ownership record of name. Without keys, Sig is "".
func (k *Keys) Sign(name string, o Owner) Owner {
	o.Sig = ""
	if k.Len() == 0 {
		return o
	}
	o.Sig = sigVersion + base64.RawURLEncoding.EncodeToString(mac(k.keys[0], name, o))
	return o
}

// Verify reports whether o.Sig is a signature of o as the ownership
// record of name by one of the keys.
func (k *Keys) Verify(name string, o Owner) bool {
	rest, ok := strings.CutPrefix(o.Sig, sigVersion)
	if !ok || k.Len() == 0 {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	for _, key := range k.keys {
		if hmac.Equal(got, mac(key, name, o)) {
			return true
		}
	}
	return false
}

// mac is HMAC-SHA256 over the owned name and every field of o but Sig,
// each length-prefixed, so no two different records share an input. The
// kind of a Gateway API owner comes last, only when set, so the records
// of Ingresses verify as they always did.
func mac(key []byte, name string, o Owner) []byte {
	h := hmac.New(sha256.New, key)
	since := ""
	if !o.UnwantedSince.IsZero() {
		since = strconv.FormatInt(o.UnwantedSince.Unix(), 10)
	}
	fields := []string{"sluice-owner/v1", name, o.ID, o.Ingress.Namespace, o.Ingress.Name, o.Ingress.UID, since}
	if o.Ingress.Kind != "" {
		fields = append(fields, "kind="+o.Ingress.Kind)
	}
	for _, f := range fields {
		h.Write([]byte(strconv.Itoa(len(f))))
		h.Write([]byte{':'})
		h.Write([]byte(f))
	}
	return h.Sum(nil)
}
