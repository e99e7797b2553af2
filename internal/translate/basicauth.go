package translate

import (
	"bytes"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"sluice.dev/sluice/internal/route"
)

// Annotations of HTTP basic authentication (route.BasicAuth).
const (
	// AnnotationAuthType: "basic" demands credentials from
	// AnnotationAuthSecret. An auth-secret alone implies "basic".
	AnnotationAuthType = "sluice.dev/auth-type"
	// AnnotationAuthSecret names a Secret in the Ingress's own namespace
	// whose key AuthSecretKey holds htpasswd lines ("user:{SHA}base64" or
	// "user:$apr1$salt$hash").
	// A missing Secret, one in another namespace, or one without a usable
	// user makes the routes answer 503 (fail closed).
	AnnotationAuthSecret = "sluice.dev/auth-secret"
	// AnnotationAuthRealm is the realm of the WWW-Authenticate challenge;
	// default DefaultAuthRealm.
	AnnotationAuthRealm = "sluice.dev/auth-realm"
)

// Basic authentication defaults and limits.
const (
	// AuthSecretLabel must be "true" on a basic-authentication Secret in
	// a cluster: the proxy watches TLS Secrets and Secrets with this
	// label, and no other Secret of a tenant.
	AuthSecretLabel  = "sluice.dev/auth-secret"
	AuthSecretKey    = "auth"
	DefaultAuthRealm = "Authentication Required"
	// MaxAuthUsers bounds the users read from one Secret.
	MaxAuthUsers = 10000
	maxRealmLen  = 128
)

// basicAuth reads the basic-authentication annotations of ing and loads its
// Secret. Problems about the Secret are reported here (ReasonAuthSecret);
// annotation problems are appended to errs.
func (b *builder) basicAuth(ing *networkingv1.Ingress, errs []annotationError) (*route.BasicAuth, []annotationError) {
	ann := ing.Annotations
	typ, typeSet := ann[AnnotationAuthType]
	name, secretSet := ann[AnnotationAuthSecret]
	realm, realmSet := ann[AnnotationAuthRealm]
	if !typeSet && !secretSet {
		if realmSet {
			errs = append(errs, annotationError{AnnotationAuthRealm, "has no effect without " + AnnotationAuthType + ": basic"})
		}
		return nil, errs
	}
	a := &route.BasicAuth{Realm: DefaultAuthRealm, Refuse: true}
	if typeSet && strings.TrimSpace(typ) != "basic" {
		// Authentication was asked for: fail closed.
		errs = append(errs, annotationError{AnnotationAuthType, `must be "basic"; the routes answer 503`})
		return a, errs
	}
	if realmSet {
		r := strings.TrimSpace(realm)
		if r == "" || len(r) > maxRealmLen || !isPrintNoQuote(r) {
			errs = append(errs, annotationError{AnnotationAuthRealm, "must be printable ASCII without quotes or backslashes, at most 128 characters; using " + DefaultAuthRealm})
		} else {
			a.Realm = r
		}
	}
	name = strings.TrimSpace(name)
	if !secretSet || name == "" || len(validation.IsDNS1123Subdomain(name)) > 0 {
		errs = append(errs, annotationError{AnnotationAuthSecret, "must name a Secret in the namespace of the Ingress; the routes answer 503"})
		return a, errs
	}
	a.Secret = ing.Namespace + "/" + name
	if b.opts.SecretsUnread {
		// The controller: the proxies read the Secret and report it.
		return a, errs
	}
	b.use("k:" + a.Secret)
	sec := b.secrets[a.Secret]
	if sec == nil {
		b.problem(ing, ReasonAuthSecret, "Secret "+a.Secret+" of "+AnnotationAuthSecret+" not found (in a cluster it needs the label "+AuthSecretLabel+": \"true\"); the routes answer 503 until it exists")
		return a, errs
	}
	a.Revision = sec.ResourceVersion
	users, skipped := parseHtpasswd(sec.Data[AuthSecretKey])
	if skipped > 0 {
		b.problem(ing, ReasonAuthSecret, "Secret "+a.Secret+": lines of key auth that are not user:{SHA}hash or user:$apr1$salt$hash entries (bcrypt and crypt hashes are not supported by this build) or repeat a user: "+
			strconv.Itoa(skipped)+"; those users cannot log in")
	}
	if len(users) == 0 {
		b.problem(ing, ReasonAuthSecret, "Secret "+a.Secret+" has no usable user in key auth; the routes answer 503")
		return a, errs
	}
	a.Users, a.Refuse = users, false
	return a, errs
}

// parseHtpasswd reads htpasswd lines "user:hash". Only {SHA} hashes (the
// base64 SHA-1 of the password, 28 characters) and Apache MD5 ones
// ("$apr1$salt$hash", htpasswd's default) are kept; skipped counts the
// other non-empty, non-comment lines and repeated users.
func parseHtpasswd(data []byte) (users map[string]string, skipped int) {
	users = make(map[string]string)
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		l := strings.TrimSpace(string(line))
		if l == "" || l[0] == '#' {
			continue
		}
		user, hash, ok := strings.Cut(l, ":")
		if !ok || user == "" || len(user) > 255 || !isPrintNoQuote(user) || !validSHAHash(hash) && !validAPR1Hash(hash) {
			skipped++
			continue
		}
		if _, dup := users[user]; dup || len(users) == MaxAuthUsers {
			skipped++
			continue
		}
		users[user] = hash
	}
	if len(users) == 0 {
		return nil, skipped
	}
	return users, skipped
}

func validSHAHash(h string) bool {
	rest, ok := strings.CutPrefix(h, "{SHA}")
	if !ok || len(rest) != 28 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return true
}

// validAPR1Hash accepts "$apr1$" + a salt of 1 to 8 characters + "$" + 22
// characters, all of the crypt alphabet.
func validAPR1Hash(h string) bool {
	rest, ok := strings.CutPrefix(h, "$apr1$")
	if !ok {
		return false
	}
	salt, sum, ok := strings.Cut(rest, "$")
	if !ok || len(salt) < 1 || len(salt) > 8 || len(sum) != 22 {
		return false
	}
	return cryptAlphabet(salt) && cryptAlphabet(sum)
}

func cryptAlphabet(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '/') {
			return false
		}
	}
	return true
}

// isPrintNoQuote accepts printable ASCII other than '"' and '\'.
func isPrintNoQuote(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
