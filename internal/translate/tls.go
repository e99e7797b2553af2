package translate

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"sluice.dev/sluice/internal/route"
)

// keyPair is a parsed Secret, or why it could not be parsed.
type keyPair struct {
	cert            *tls.Certificate
	reason, message string
}

// sniOwner is the TLS entry that serves a host name.
type sniOwner struct {
	ingress string // namespace/name
	source  string // Secret namespace/name
}

// keyPair parses the kubernetes.io/tls Secret namespace/name once per build,
// or takes it from the cache when it has not changed since an earlier build.
func (b *builder) keyPair(namespace, name string) keyPair {
	nsName := namespace + "/" + name
	b.use("k:" + nsName)
	if kp, ok := b.keyPairs[nsName]; ok {
		return kp
	}
	var kp keyPair
	if b.cache != nil {
		kp = b.cache.lookup(nsName, b.secrets[nsName])
	} else {
		kp = parseSecret(nsName, b.secrets[nsName])
	}
	b.keyPairs[nsName] = kp
	return kp
}

func parseSecret(nsName string, s *corev1.Secret) keyPair {
	if s == nil {
		return keyPair{reason: "SecretNotFound", message: "secret " + nsName + " not found: create it (type " + string(corev1.SecretTypeTLS) + ", keys " + corev1.TLSCertKey + " and " + corev1.TLSPrivateKeyKey + ") or fix the secretName"}
	}
	if s.Type != corev1.SecretTypeTLS {
		return keyPair{reason: "InvalidSecret", message: "secret " + nsName + " is not of type " + string(corev1.SecretTypeTLS)}
	}
	crt, key := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	if len(crt) == 0 || len(key) == 0 {
		return keyPair{reason: "InvalidSecret", message: "secret " + nsName + " lacks " + corev1.TLSCertKey + " or " + corev1.TLSPrivateKeyKey}
	}
	cert, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return keyPair{reason: "InvalidSecret", message: fmt.Sprintf("secret %s: parsing key pair: %v", nsName, err)}
	}
	if cert.Leaf == nil {
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			return keyPair{reason: "InvalidSecret", message: fmt.Sprintf("secret %s: parsing certificate: %v", nsName, err)}
		}
		cert.Leaf = leaf
	}
	return keyPair{cert: &cert}
}

// addTLS claims the SNI names of ing's spec.tls entries. An entry without
// hosts covers the Ingress's own rule hosts (ruleHosts). An entry without a
// secretName is SNI routing only and claims nothing: its hosts get the
// default certificate. The first claim of a name wins (Ingresses arrive
// oldest first), whether or not its Secret is usable: a missing or broken
// Secret loses only its own hosts' TLS (they get the default certificate)
// and never hands them to a newer Ingress.
// It reports whether the Ingress now serves a certificate for some name.
func (b *builder) addTLS(ing *networkingv1.Ingress, ruleHosts []string) (claimed bool) {
	for i, t := range ing.Spec.TLS {
		where := fmt.Sprintf("spec.tls[%d]", i)
		hosts := t.Hosts
		if len(hosts) == 0 {
			if len(ruleHosts) == 0 {
				if !namesRuleHost(ing) { // else its hosts are refused (HostOwnedElsewhere)
					b.problem(ing, "InvalidTLS", where+": no hosts, and the Ingress has no rule hosts to use instead; ignored")
				}
				continue
			}
			hosts = ruleHosts
		}
		var owned []string
		for _, h := range hosts {
			h, msg := checkHost(h)
			switch {
			case msg != "" || h == "":
				owned = append(owned, h) // reported below, with a Secret
			case !b.own.Owns(ing.Namespace, h):
				if b.own.Serves(ing.Namespace, h) {
					b.problem(ing, ReasonHostOwnedElsewhere, fmt.Sprintf("%s: host %s is shared with this namespace by its owner, but only the owner's spec.tls chooses its certificate and redirect; ignored", where, h))
				} else {
					b.problem(ing, ReasonHostOwnedElsewhere, fmt.Sprintf("host %s is owned by another namespace (the namespace of its oldest Ingress), which does not share it with this one; its rules, certificate and DNS record are not served from this Ingress", h))
				}
			default:
				b.tlsHosts[h] = ing.Namespace
				owned = append(owned, h)
			}
		}
		hosts = owned
		if t.SecretName == "" {
			continue
		}
		kp := b.keyPair(ing.Namespace, t.SecretName)
		if kp.reason != "" && !b.opts.SecretsUnread {
			b.problem(ing, kp.reason, where+": "+kp.message+"; until then its hosts get the proxy's default certificate (--default-certificate, else one the proxy generated, which clients do not trust)")
		}
		source := ing.Namespace + "/" + t.SecretName
		for _, h := range hosts {
			h, msg := checkHost(h)
			switch {
			case msg != "":
				b.problem(ing, "InvalidHost", fmt.Sprintf("%s: host %q %s; skipped", where, h, msg))
				continue
			case h == "":
				continue
			}
			owner, taken := b.sni[h]
			if !taken {
				b.sni[h] = sniOwner{ingress: ing.Namespace + "/" + ing.Name, source: source}
				if kp.cert != nil {
					b.certs[source] = append(b.certs[source], h)
					b.certOf[source] = kp.cert
					claimed = true
				}
				claimed = claimed || b.opts.SecretsUnread
				continue
			}
			if owner.source != source {
				b.problem(ing, "Conflict", fmt.Sprintf("%s: TLS for host %s is already claimed with secret %s by Ingress %s, which takes precedence (older, or first by namespace/name); skipped", where, h, owner.source, owner.ingress))
			}
		}
	}
	return claimed
}

// coveredByTLS reports whether a rule host has TLS from its owner: the
// owner's spec.tls names it, or a wildcard one label up whose namespace
// owns the host or is shared it. The rule without a host ("") is never
// covered: there is no name to redirect to.
func (b *builder) coveredByTLS(host string) bool {
	if host == "" {
		return false
	}
	if _, ok := b.tlsHosts[host]; ok {
		return true
	}
	if strings.HasPrefix(host, "*.") {
		return false
	}
	if i := strings.IndexByte(host, '.'); i > 0 {
		ns, ok := b.tlsHosts["*"+host[i:]]
		return ok && b.own.Serves(ns, host)
	}
	return false
}

// noWildcard returns the exact hosts without a certificate of their own
// that a claimed wildcard certificate covers although the host's owner
// neither is the wildcard's namespace nor shares the host with it: they get
// the default certificate, never another tenant's. Sorted.
func (b *builder) noWildcard() []string {
	if b.own == nil || !b.own.on {
		return nil
	}
	var out []string
	for h := range b.own.owner {
		i := strings.IndexByte(h, '.')
		if strings.HasPrefix(h, "*.") || i <= 0 {
			continue
		}
		if o, ok := b.sni[h]; ok && b.certOf[o.source] != nil {
			continue // a certificate of its own
		}
		w, ok := b.sni["*"+h[i:]]
		if !ok || b.certOf[w.source] == nil {
			continue
		}
		wns, _, _ := strings.Cut(w.source, "/")
		if !b.own.Serves(wns, h) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// namesRuleHost reports whether a rule of ing names a host.
func namesRuleHost(ing *networkingv1.Ingress) bool {
	for i := range ing.Spec.Rules {
		if ing.Spec.Rules[i].Host != "" {
			return true
		}
	}
	return false
}

// certificates returns the claimed certificates sorted by source, hosts
// sorted.
func (b *builder) certificates() []route.Certificate {
	out := make([]route.Certificate, 0, len(b.certs))
	for source, hosts := range b.certs {
		slices.Sort(hosts)
		out = append(out, route.Certificate{Hosts: hosts, Source: source, Cert: b.certOf[source]})
	}
	slices.SortFunc(out, func(a, b route.Certificate) int { return strings.Compare(a.Source, b.Source) })
	return out
}

// defaultCertificate resolves Options.DefaultCertificate; problems are
// reported on the Secret.
func (b *builder) defaultCertificate() *route.Certificate {
	ref := b.opts.DefaultCertificate
	if ref == "" {
		return b.gatewayDefault
	}
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		b.problems = append(b.problems, Problem{Kind: "Secret", Name: ref, Reason: "InvalidOption",
			Message: "default certificate must be namespace/name; the proxy serves its generated self-signed certificate instead"})
		return nil
	}
	if b.opts.SecretsUnread {
		return nil // the proxies read and report it
	}
	kp := b.keyPair(ns, name)
	if kp.reason != "" {
		b.problems = append(b.problems, Problem{Kind: "Secret", Namespace: ns, Name: name, Reason: kp.reason,
			Message: "default certificate: " + kp.message + "; the proxy serves its generated self-signed certificate instead"})
		return nil
	}
	return &route.Certificate{Source: ref, Cert: kp.cert}
}
