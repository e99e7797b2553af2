//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The gateway-backend-tls case: an echo-basic pod serving HTTPS with a
// certificate for gwTLSName (and the URI gwTLSURI) from a CA of the test,
// behind an HTTPRoute for gwTLSHost and a BackendTLSPolicy naming the
// CA's ConfigMap.
const (
	gwTLSHost = "tls.gw.test"
	gwTLSName = "secure.gw.test" // the policy's hostname: SNI and verified name
	gwTLSURI  = "spiffe://gw.test/ns/gw-a/sa/tls-echo"
	gwTLSApp  = "tls-echo"
)

// backendTLS: every request is answered by the pod over TLS with the
// policy's SNI; with subjectAltNames naming a URI the certificate lacks,
// every request fails the handshake (502), naming its URI, every request
// is answered again (the hostname the SNI only); the ConfigMap changed to
// another CA, every request fails the handshake (502); the ConfigMap deleted, the backend has no
// endpoints (503) and the policy says NoValidCACertificate. Never an
// answer in plain HTTP. failed counts requests answered otherwise.
func (g *gatewaySuite) backendTLS() (int, int, string) {
	e := g.e
	ctx := context.Background()
	ca, caKey := testCA(e)
	cert, key := leafCert(e, ca, caKey, gwTLSName, gwTLSURI)
	other, _ := testCA(e)
	labels := map[string]string{"app.kubernetes.io/name": gwTLSApp}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: gwA, Name: gwTLSApp + "-ca"}, Data: map[string]string{"ca.crt": pemOf(ca)}}
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: gwA, Name: gwTLSApp + "-cert"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": []byte(cert), "tls.key": []byte(key)}},
		cm,
		tlsEchoDeployment(labels),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: gwA, Name: gwTLSApp},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromString("https")}}}},
		&gatewayv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: gwA, Name: gwTLSApp},
			Spec: gatewayv1.BackendTLSPolicySpec{
				TargetRefs: []gatewayv1.LocalPolicyTargetReferenceWithSectionName{{LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Kind: "Service", Name: gwTLSApp}}},
				Validation: gatewayv1.BackendTLSPolicyValidation{Hostname: gwTLSName,
					CACertificateRefs: []gatewayv1.LocalObjectReference{{Kind: "ConfigMap", Name: gatewayv1.ObjectName(cm.Name)}}},
			}},
	}
	rt := httpRoute(gwA, gwTLSApp, gwTLSHost, "", gwTLSApp)
	rt.Spec.Rules[0].BackendRefs[0].Port = ptrTo(gatewayv1.PortNumber(443))
	objs = append(objs, rt)
	for _, o := range objs {
		g.must(g.cl.Create(ctx, o))
	}
	defer func() {
		for _, o := range objs {
			_ = g.cl.Delete(ctx, o)
		}
	}()
	e.settled(gwA, gwTLSApp, 3*time.Minute)
	g.policyCondition(gwTLSApp, "Accepted", metav1.ConditionTrue, "Accepted")

	// Each phase counts once every proxy has taken the change: settle
	// answers in a row as wanted (each request on a new connection,
	// which HAProxy spreads over the proxies).
	const settle = 10
	var requests, failed int
	phase := func(what string, ok func(status int, body echoedTLS) bool) {
		streak := 0
		e.eventually(gwStatusWait, what, func(context.Context) (bool, error) {
			st, b, err := g.tlsGet()
			if err != nil || !ok(st, b) {
				streak = 0
				return false, nil
			}
			streak++
			return streak >= settle, nil
		})
		for range gwProbes {
			st, b, err := g.tlsGet()
			requests++
			if err != nil || !ok(st, b) {
				failed++
				e.t.Logf("%s: %d %+v %v", what, st, b, err)
			}
		}
	}
	verified := func(st int, b echoedTLS) bool { return st == 200 && b.TLS != nil && b.TLS.ServerName == gwTLSName }
	phase("answered over TLS with the policy's SNI", verified)
	// subjectAltNames: a merge patch of the spec (the controller writes
	// the status meanwhile).
	sans := func(uri string) {
		patch := []byte(fmt.Sprintf(`{"spec":{"validation":{"subjectAltNames":[{"type":"URI","uri":%q}]}}}`, uri))
		g.must(g.cl.Patch(ctx, &gatewayv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: gwA, Name: gwTLSApp}}, client.RawPatch(types.MergePatchType, patch)))
	}
	sans(gwTLSURI + "-other")
	phase("502 with a URI SAN the certificate lacks", func(st int, _ echoedTLS) bool { return st == http.StatusBadGateway })
	sans(gwTLSURI) // kept for the phases below
	phase("answered with the certificate's URI SAN", verified)
	cm.Data["ca.crt"] = pemOf(other)
	g.must(g.cl.Update(ctx, cm))
	phase("502 with another CA", func(st int, _ echoedTLS) bool { return st == http.StatusBadGateway })
	g.must(g.cl.Delete(ctx, cm))
	phase("503 without the CA ConfigMap", func(st int, _ echoedTLS) bool { return st == http.StatusServiceUnavailable })
	g.policyCondition(gwTLSApp, "Accepted", metav1.ConditionFalse, "NoValidCACertificate")
	return requests, failed, fmt.Sprintf("phases=verified,san_mismatch_502,san_uri,wrong_ca_502,no_ca_503 per_phase=%d", gwProbes)
}

// echoedTLS is what of echo-basic's answer the case reads.
type echoedTLS struct {
	Pod string `json:"pod"`
	TLS *struct {
		ServerName string `json:"serverName"`
	} `json:"tls"`
}

// tlsGet sends one request for gwTLSHost through HAProxy.
func (g *gatewaySuite) tlsGet() (int, echoedTLS, error) {
	var b echoedTLS
	req, err := http.NewRequest(http.MethodGet, "http://"+g.lb()+"/", nil)
	if err != nil {
		return 0, b, err
	}
	req.Host = gwTLSHost
	req.Close = true
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, b, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == 200 && err == nil {
		err = json.Unmarshal(body, &b)
	}
	return resp.StatusCode, b, err
}

// policyCondition waits until the BackendTLSPolicy's sluice ancestor
// entry has condition typ with status and reason.
func (g *gatewaySuite) policyCondition(name, typ string, status metav1.ConditionStatus, reason string) {
	g.e.t.Helper()
	g.e.eventually(gwStatusWait, fmt.Sprintf("BackendTLSPolicy %s %s=%s %s", name, typ, status, reason), func(ctx context.Context) (bool, error) {
		var p gatewayv1.BackendTLSPolicy
		if err := g.cl.Get(ctx, client.ObjectKey{Namespace: gwA, Name: name}, &p); err != nil {
			return false, err
		}
		for _, a := range p.Status.Ancestors {
			if a.ControllerName == "sluice.dev/gateway-controller" {
				c := meta.FindStatusCondition(a.Conditions, typ)
				return c != nil && c.Status == status && c.Reason == reason, nil
			}
		}
		return false, nil
	})
}

// tlsEchoDeployment runs echo-basic with HTTPS on 8443 and the
// certificate of the Secret gwTLSApp-cert.
func tlsEchoDeployment(labels map[string]string) *appsv1.Deployment {
	one := int32(1)
	env := []corev1.EnvVar{
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "NAMESPACE", Value: gwA},
		{Name: "HTTPS_PORT", Value: "8443"},
		{Name: "TLS_SERVER_CERT", Value: "/etc/tls/tls.crt"},
		{Name: "TLS_SERVER_PRIVKEY", Value: "/etc/tls/tls.key"},
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: gwA, Name: gwTLSApp},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "echo", Image: "echo-basic", Env: env,
						Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: 3000}, {Name: "https", ContainerPort: 8443}},
						VolumeMounts: []corev1.VolumeMount{{Name: "cert", MountPath: "/etc/tls", ReadOnly: true}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}},
							PeriodSeconds: 1, FailureThreshold: 1,
						},
					}},
					Volumes: []corev1.Volume{{Name: "cert", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: gwTLSApp + "-cert"}}}},
				},
			},
		},
	}
}

// testCA is a self-signed CA of the test.
func testCA(e *env) (*x509.Certificate, *ecdsa.PrivateKey) {
	e.t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		e.t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "sluice e2e CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		e.t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		e.t.Fatal(err)
	}
	return c, k
}

// leafCert is a server certificate for name and the URIs, signed by ca
// (PEM cert, key).
func leafCert(e *env, ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, uris ...string) (string, string) {
	e.t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		e.t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			e.t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
	if err != nil {
		e.t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}))
}

func pemOf(c *x509.Certificate) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
}

func ptrTo[T any](v T) *T { return &v }
