package translate

import (
	"crypto/x509"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"sluice.dev/sluice/internal/route"
)

// Annotations of the protocol spoken to a backend's pods.
const (
	// AnnotationBackendProtocol overrides the protocol the Service port's
	// appProtocol selects: "http", "h2c", "grpc", "https" or "grpcs".
	AnnotationBackendProtocol = "sluice.dev/backend-protocol"
	// AnnotationBackendCASecret names a Secret in the Ingress's namespace
	// whose "ca.crt" holds the PEM CA certificates that HTTPS and GRPCS
	// endpoints must chain to; default the system roots.
	AnnotationBackendCASecret = "sluice.dev/backend-ca-secret"
	// AnnotationBackendSNI is the server name sent to HTTPS and GRPCS
	// endpoints and verified in their certificates; default
	// "<service>.<namespace>.svc".
	AnnotationBackendSNI = "sluice.dev/backend-sni"
	// AnnotationBackendInsecureSkipVerify: "true" accepts any certificate
	// from HTTPS and GRPCS endpoints; default "false".
	AnnotationBackendInsecureSkipVerify = "sluice.dev/backend-insecure-skip-verify"
)

// CAKey is the Secret data key holding a backend CA bundle.
const CAKey = "ca.crt"

// upstreamAnnotations is what an Ingress asks of the protocol to its pods.
type upstreamAnnotations struct {
	protocol    route.Protocol
	protocolSet bool
	caSecret    string
	sni         string
	skipVerify  bool
}

// parseUpstream reads the backend protocol annotations. Invalid values are
// reported and left unset.
func parseUpstream(ann map[string]string) (upstreamAnnotations, []annotationError) {
	var u upstreamAnnotations
	var errs []annotationError
	fail := func(key, msg string) { errs = append(errs, annotationError{key, msg}) }
	if v, ok := ann[AnnotationBackendProtocol]; ok {
		p, valid := parseProtocol(v)
		if !valid {
			fail(AnnotationBackendProtocol, `must be "http", "h2c", "grpc", "https" or "grpcs"; using the appProtocol of the Service port`)
		}
		u.protocol, u.protocolSet = p, valid
	}
	if v, ok := ann[AnnotationBackendCASecret]; ok {
		v = strings.TrimSpace(v)
		if len(validation.IsDNS1123Subdomain(v)) > 0 {
			fail(AnnotationBackendCASecret, "must be the name of a Secret in the namespace of the Ingress; the backend gets no endpoints")
			u.caSecret = "\x00" // invalid: fail closed, never the system roots
		} else {
			u.caSecret = v
		}
	}
	if v, ok := ann[AnnotationBackendSNI]; ok {
		v = strings.ToLower(strings.TrimSpace(v))
		if len(validation.IsDNS1123Subdomain(v)) > 0 {
			fail(AnnotationBackendSNI, "must be a DNS name; using SERVICE.NAMESPACE.svc")
		} else {
			u.sni = v
		}
	}
	if v, ok := ann[AnnotationBackendInsecureSkipVerify]; ok {
		b, valid := parseBool(v)
		if !valid {
			fail(AnnotationBackendInsecureSkipVerify, `must be "true" or "false"; verifying`)
		}
		u.skipVerify = b
	}
	return u, errs
}

// parseProtocol accepts the values of AnnotationBackendProtocol.
func parseProtocol(v string) (route.Protocol, bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "http":
		return route.ProtocolHTTP, true
	case "h2c":
		return route.ProtocolH2C, true
	case "grpc":
		return route.ProtocolGRPC, true
	case "https":
		return route.ProtocolHTTPS, true
	case "grpcs":
		return route.ProtocolGRPCS, true
	}
	return route.ProtocolHTTP, false
}

// protocolOf maps a Service port's appProtocol to a protocol: the
// Kubernetes-standard kubernetes.io/h2c, kubernetes.io/ws and
// kubernetes.io/wss, and the IANA-style https, grpc and grpcs; anything
// else (http, tcp, unset, unknown) is HTTP/1.1.
func protocolOf(appProtocol string) route.Protocol {
	switch strings.ToLower(appProtocol) {
	case "kubernetes.io/h2c", "h2c":
		return route.ProtocolH2C
	case "grpc":
		return route.ProtocolGRPC
	case "https", "kubernetes.io/wss":
		return route.ProtocolHTTPS
	case "grpcs":
		return route.ProtocolGRPCS
	}
	return route.ProtocolHTTP
}

// upstreamKey is the comparable form of a backend's protocol settings.
type upstreamKey struct {
	protocol   route.Protocol
	caSecret   string
	sni        string
	skipVerify bool
}

// upstreamTLS resolves the TLS settings of an HTTPS or GRPCS backend. ok
// is false, after reporting a Problem, when the CA Secret is missing or
// unusable: the backend then gets no endpoints rather than unverified
// connections.
func (b *builder) upstreamTLS(report func(reason, msg string), namespace, service string, u upstreamAnnotations) (t *route.UpstreamTLS, ok bool) {
	t = &route.UpstreamTLS{ServerName: u.sni, InsecureSkipVerify: u.skipVerify}
	if t.ServerName == "" {
		t.ServerName = service + "." + namespace + ".svc"
	}
	switch u.caSecret {
	case "":
		return t, true
	case "\x00":
		return t, false // reported by parseUpstream
	}
	if b.opts.SecretsUnread {
		return t, true // the proxies read and report it
	}
	nsName := namespace + "/" + u.caSecret
	b.use("k:" + nsName)
	s := b.secrets[nsName]
	if s == nil {
		report("SecretNotFound", "the Secret named by "+AnnotationBackendCASecret+" is not in namespace "+namespace+"; the backend gets no endpoints")
		return t, false
	}
	pem := s.Data[CAKey]
	if len(pem) == 0 || !x509.NewCertPool().AppendCertsFromPEM(pem) {
		report("InvalidSecret", "the Secret named by "+AnnotationBackendCASecret+" has no PEM certificate in "+CAKey+"; the backend gets no endpoints")
		return t, false
	}
	t.CA, t.CASource = pem, nsName
	return t, true
}
