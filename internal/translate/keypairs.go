package translate

import (
	"bytes"

	corev1 "k8s.io/api/core/v1"
)

// KeyPairCache keeps parsed kubernetes.io/tls Secrets from one Build to the
// next, so a rebuild parses only the Secrets that changed. An entry is keyed
// by the Secret's namespace/name and its version: UID and resourceVersion,
// or, for objects without a resourceVersion (manifest files), the content
// itself (UID, type, certificate and key compared byte for byte: cheaper
// than hashing them on every build, and without collisions).
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
	version string // UID/resourceVersion; "" when the content is the version
	// The content parsed, kept to compare when version is "" (the
	// Secret's own, immutable, byte slices: nothing is copied).
	uid, typ string
	crt, key []byte
	kp       keyPair
	used     bool // looked up by the Build in progress
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
	crt, key := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	if e, ok := c.entries[nsName]; ok && e.version == v &&
		(v != "" || e.uid == string(s.UID) && e.typ == string(s.Type) && bytes.Equal(e.crt, crt) && bytes.Equal(e.key, key)) {
		e.used = true
		c.entries[nsName] = e
		return e.kp
	}
	kp := parseSecret(nsName, s)
	e := cachedKeyPair{version: v, kp: kp, used: true}
	if v == "" {
		e.uid, e.typ, e.crt, e.key = string(s.UID), string(s.Type), crt, key
	}
	c.entries[nsName] = e
	return kp
}

// sweep evicts the entries the last Build did not use and clears the marks.
// forget drops the entry of a Secret that is gone (nil-safe). Partial
// builds (incremental.go) do not sweep.
func (c *KeyPairCache) forget(nsName string) {
	if c != nil {
		delete(c.entries, nsName)
	}
}

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

// secretVersion is UID/resourceVersion, or "" when the Secret has no
// resourceVersion (its content is then compared). The UID is part of it, so
// a Secret deleted and created again under the same name is parsed again.
func secretVersion(s *corev1.Secret) string {
	if s.ResourceVersion == "" {
		return ""
	}
	return string(s.UID) + "/" + s.ResourceVersion
}
