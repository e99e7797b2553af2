package proxy

import (
	"net/http"
	"net/url"
	"strings"
)

// Request paths are normalised before they are matched, and the normal
// form is what the pod receives: "." and ".." segments are resolved (RFC
// 3986 section 5.2.4; a ".." above the root stays at the root, so
// "/../x" is "/x") and runs of "/" are merged. Otherwise "/public/../admin"
// would match a rule for /public and reach a pod that, like most
// frameworks, serves /admin, which no rule exposed.
//
// An encoded "/", "\" or "." (%2F, %5C, %2E, any case) or a literal "\"
// in the path is refused with 400 unless Options.AllowEncodedSlashes is
// set: pods disagree on whether they decode them before splitting the
// path into segments (a "\" is a separator to some), so the proxy cannot
// know which path the pod will serve. With the option they pass to the
// pod as they came (they are not separators or dot segments to the
// normaliser), and the path rules see the path decoded and then
// normalised: "/public/%2E%2E/admin" goes to the pod as it is but is
// matched as "/admin", the path a pod that decodes first would serve.
//
// The query is never touched. A path that is already normal, the common
// case, costs one scan and no allocation.

var bodyBadPath = []byte("sluice: encoded slash, backslash or dot in the request path\n")

// normalizeRequest normalises r.URL's path in place. It returns the path
// to match the rules with, and false if the request must be refused with
// 400.
func (p *Proxy) normalizeRequest(r *http.Request) (match string, ok bool) {
	u := r.URL
	if u.RawPath == "" {
		// Path is its own escaped form but for bytes that escaping
		// leaves in place ("/", "." and letters among them): its
		// segments are the escaped path's. A "%" in it is a decoded
		// "%25", not an escape.
		if len(u.Path) == 0 || u.Path[0] != '/' {
			return u.Path, true // "*", or an absolute-form target without a path
		}
		dirty, bad := scanPath(u.Path, false)
		if bad && !p.opts.AllowEncodedSlashes {
			return "", false
		}
		if dirty {
			u.Path = resolvePath(u.Path)
		}
		return u.Path, true
	}
	e := u.EscapedPath()
	if len(e) == 0 || e[0] != '/' {
		return u.Path, true
	}
	dirty, bad := scanPath(e, true)
	if bad && !p.opts.AllowEncodedSlashes {
		return "", false
	}
	if dirty {
		e = resolvePath(e)
		path, err := url.PathUnescape(e)
		if err != nil {
			return "", false // EscapedPath's escapes are valid: not reached
		}
		u.Path, u.RawPath = path, e
	}
	match = u.Path
	if bad {
		// Allowed encoded separators: match what a pod that decodes
		// before it resolves would serve.
		if d, _ := scanPath(match, false); d {
			match = resolvePath(match)
		}
	}
	return match, true
}

// normalizePath returns the normal form of p, an escaped path beginning
// with "/", and false if p holds an encoded "/", "\" or ".", or a literal
// "\", and allow is false. Fuzzed against path.Clean (FuzzNormalizePath).
func normalizePath(p string, allow bool) (string, bool) {
	dirty, bad := scanPath(p, true)
	if bad && !allow {
		return "", false
	}
	if dirty {
		p = resolvePath(p)
	}
	return p, true
}

// scanPath reports whether p (beginning with "/") has an empty, "." or
// ".." segment (dirty), and whether it has a literal "\" or, when escaped
// is set, a %2F, %5C or %2E in any case (bad).
func scanPath(p string, escaped bool) (dirty, bad bool) {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '/':
			if i+1 < len(p) {
				switch p[i+1] {
				case '/':
					dirty = true
				case '.':
					dirty = dirty || dotSegment(p[i+1:])
				}
			}
		case '\\':
			bad = true
		case '%':
			if escaped && i+2 < len(p) && encodedSeparator(p[i+1], p[i+2]) {
				bad = true
			}
		}
	}
	return dirty, bad
}

// dotSegment reports whether s, a path from the start of a segment that
// begins with ".", begins with a "." or ".." segment.
func dotSegment(s string) bool {
	if len(s) == 1 || s[1] == '/' {
		return true
	}
	return s[1] == '.' && (len(s) == 2 || s[2] == '/')
}

// encodedSeparator reports whether %hl encodes "/", "\" or ".".
func encodedSeparator(h, l byte) bool {
	switch h {
	case '2':
		return l == 'F' || l == 'f' || l == 'E' || l == 'e'
	case '5':
		return l == 'C' || l == 'c'
	}
	return false
}

// resolvePath removes the dot segments of p (beginning with "/") as RFC
// 3986 section 5.2.4 does and merges runs of "/". A trailing "/", or a
// last segment "." or "..", leaves a trailing "/", as the RFC says.
func resolvePath(p string) string {
	b := make([]byte, 0, len(p))
	for i := 0; i < len(p); {
		j := i + 1
		for j < len(p) && p[j] != '/' {
			j++
		}
		seg, last := p[i+1:j], j == len(p)
		switch seg {
		case "", ".":
		case "..":
			k := len(b) - 1
			for k >= 0 && b[k] != '/' {
				k--
			}
			b = b[:max(k, 0)]
		default:
			b = append(b, '/')
			b = append(b, seg...)
		}
		if last && (seg == "" || seg == "." || seg == "..") {
			b = append(b, '/')
		}
		i = j
	}
	if len(b) == 0 {
		return "/"
	}
	return string(b)
}

// acmeChallengePrefix is where ACME HTTP-01 challenges are answered (RFC
// 8555 section 8.3). They are never redirected to HTTPS: the first
// certificate of a host cannot be fetched over a TLS connection that
// needs it, and cert-manager's solver answers over plain HTTP.
const acmeChallengePrefix = "/.well-known/acme-challenge/"

func acmeChallenge(path string) bool { return strings.HasPrefix(path, acmeChallengePrefix) }
