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
	// whose key AuthSecretKey holds htpasswd lines ("user:{SHA}base64",
	// "user:$apr1$salt$hash" or bcrypt "user:$2y$10$...", cost at most
	// MaxBcryptCost).
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
	// MaxBcryptCost bounds the cost of a bcrypt hash: each check of a
	// password not yet verified costs 2^cost rounds of the proxy's CPU
	// (cost 12: about 0.25 s of one core), which a tenant must not be
	// able to raise at will. htpasswd -B uses 5 by default, ingress-nginx
	// users' generators commonly 10.
	MaxBcryptCost = 12
	maxRealmLen   = 128
)

// basicAuth reads the basic-authentication annotations of ing and loads its
// Secret. Problems about the Secret are reported here (ReasonAuthSecret);
// annotation problems are appended to errs.
func (b *builder) basicAuth(ing *networkingv1.Ingress, errs []annotationError) (*route.BasicAuth, []annotationError) {
	ann, _ := b.annotations(ing) // nginx.go: the nginx names translated
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
	users, skipped, costly := parseHtpasswd(sec.Data[AuthSecretKey])
	if skipped > 0 {
		b.problem(ing, ReasonAuthSecret, "Secret "+a.Secret+": lines of key auth that are not user:{SHA}hash, user:$apr1$salt$hash or user:$2y$cost$bcrypt entries (crypt hashes are not supported) or repeat a user: "+
			strconv.Itoa(skipped)+"; those users cannot log in")
	}
	if costly > 0 {
		b.problem(ing, ReasonAuthSecret, "Secret "+a.Secret+": bcrypt hashes with a cost above "+strconv.Itoa(MaxBcryptCost)+" (each check would cost the proxy too much CPU): "+
			strconv.Itoa(costly)+"; those users cannot log in (rehash with htpasswd -B -C 10)")
	}
	if len(users) == 0 {
		b.problem(ing, ReasonAuthSecret, "Secret "+a.Secret+" has no usable user in key auth; the routes answer 503")
		return a, errs
	}
	a.Users, a.Refuse = users, false
	return a, errs
}

// parseHtpasswd reads htpasswd lines "user:hash". Only {SHA} hashes (the
// base64 SHA-1 of the password, 28 characters), Apache MD5 ones
// ("$apr1$salt$hash", htpasswd's default) and bcrypt ones ($2a$, $2b$,
// $2y$) of a cost up to MaxBcryptCost are kept; costly counts bcrypt
// hashes of a higher cost, skipped the other non-empty, non-comment lines
// and repeated users.
func parseHtpasswd(data []byte) (users map[string]string, skipped, costly int) {
	users = make(map[string]string)
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		l := strings.TrimSpace(string(line))
		if l == "" || l[0] == '#' {
			continue
		}
		user, hash, ok := strings.Cut(l, ":")
		cost, isBcrypt := bcryptCost(hash)
		if ok && isBcrypt && cost > MaxBcryptCost {
			costly++
			continue
		}
		if !ok || user == "" || len(user) > 255 || !isPrintNoQuote(user) || !validSHAHash(hash) && !validAPR1Hash(hash) && !isBcrypt {
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
		return nil, skipped, costly
	}
	return users, skipped, costly
}

// bcryptCost returns the cost of a well-formed bcrypt hash: "$2a$", "$2b$"
// or "$2y$", two digits of cost from 4 to 31, "$", 22 characters of salt
// and 31 of hash in bcrypt's base64 alphabet (the crypt one).
func bcryptCost(h string) (int, bool) {
	if len(h) != 60 || h[0] != '$' || h[1] != '2' || h[2] != 'a' && h[2] != 'b' && h[2] != 'y' || h[3] != '$' || h[6] != '$' {
		return 0, false
	}
	if h[4] < '0' || h[4] > '9' || h[5] < '0' || h[5] > '9' {
		return 0, false
	}
	cost := int(h[4]-'0')*10 + int(h[5]-'0')
	if cost < 4 || cost > 31 || !cryptAlphabet(h[7:]) {
		return 0, false
	}
	return cost, true
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
