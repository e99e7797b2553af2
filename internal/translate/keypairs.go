package translate

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"
)

// KeyPairCache keeps parsed kubernetes.io/tls Secrets from one Build to the
// next, so a rebuild parses only the Secrets that changed. An entry is keyed
// by the Secret's namespace/name and its version: the resourceVersion, or,
// for objects without one (manifest files), a SHA-256 of its type and data.
// After each Build the cache holds exactly the Secrets that Build looked up
// and found: entries of Secrets that are gone or no longer referenced are
// evicted.
//
// It is owned by one rebuild loop and passed to BuildCached; it is not safe
// for concurrent use, and there is no shared global cache. The results of a
// Build do not depend on what the cache held: it only saves work.
type KeyPairCache struct {
	entries map[string]cachedKeyPair // Secret namespace/name
}

type cachedKeyPair struct {
	version string
	kp      keyPair
	used    bool // looked up by the Build in progress
}

// NewKeyPairCache returns an empty cache.
func NewKeyPairCache() *KeyPairCache {
	return &KeyPairCache{entries: make(map[string]cachedKeyPair)}
}

// Len is the number of parsed Secrets held.
func (c *KeyPairCache) Len() int { return len(c.entries) }

// lookup returns the parsed Secret nsName, parsing it if the cache holds no
// entry of its version, and marks it used.
func (c *KeyPairCache) lookup(nsName string, s *corev1.Secret) keyPair {
	if s == nil {
		return parseSecret(nsName, nil)
	}
	v := secretVersion(s)
	if e, ok := c.entries[nsName]; ok && e.version == v {
		e.used = true
		c.entries[nsName] = e
		return e.kp
	}
	kp := parseSecret(nsName, s)
	c.entries[nsName] = cachedKeyPair{version: v, kp: kp, used: true}
	return kp
}

// sweep evicts the entries the last Build did not use and clears the marks.
func (c *KeyPairCache) sweep() {
	for k, e := range c.entries {
		if !e.used {
			delete(c.entries, k)
			continue
		}
		e.used = false
		c.entries[k] = e
	}
}

// secretVersion is the resourceVersion, or "sha256:" and a hash of the type
// and data when there is none. The UID is part of it, so a Secret deleted and
// created again under the same name is parsed again.
func secretVersion(s *corev1.Secret) string {
	if s.ResourceVersion != "" {
		return string(s.UID) + "/" + s.ResourceVersion
	}
	h := sha256.New()
	var n [8]byte
	for _, part := range [][]byte{[]byte(s.UID), []byte(s.Type), s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
