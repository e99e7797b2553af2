package admission

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WebhookName names the one webhook in the configuration.
const WebhookName = "eviction.floor.sluice.dev"

// Options configures a Server.
type Options struct {
	// Address the HTTPS server listens on, e.g. ":9443". Required.
	Address string
	// CertDir keeps the generated CA and serving certificate (ca.crt,
	// ca.key, tls.crt, tls.key) across restarts. "": memory only (a new
	// CA, injected again, at every start).
	CertDir string
	// Hosts are the serving certificate's DNS names and IPs: the Service's
	// names (NAME.NAMESPACE.svc) or the host of URL. Required.
	Hosts []string
	// ConfigName is the ValidatingWebhookConfiguration the server creates
	// or updates with its caBundle. Default "sluice-eviction-floor".
	ConfigName string
	// URL is the webhook's address for the API server when it is reached
	// directly ("https://127.0.0.1:9443"); Path is appended. Exactly one
	// of URL and Service.
	URL string
	// Service is the Service in front of the controller, "namespace/name"
	// or "namespace/name:port" (port default 443).
	Service string
	// Client writes the webhook configuration. Required.
	Client client.Client
	// Handler answers the reviews. Required.
	Handler http.Handler
	// Steer, if not nil, answers pod creation reviews at SteerPath, and
	// the server keeps the MutatingWebhookConfiguration SteerConfigName
	// (default "sluice-zone-steer") too.
	Steer           http.Handler
	SteerConfigName string
	// RenewEvery is how often the certificates are checked for renewal.
	// Default 1h.
	RenewEvery time.Duration
	// Logger: nil discards.
	Logger *slog.Logger
	// Now is the clock of the certificates. Nil: time.Now.
	Now func() time.Time
}

// Server serves the webhook over HTTPS with its own certificate and keeps
// the webhook configuration's caBundle current. It is a controller-runtime
// Runnable that needs leader election: the leader's reconcilers fill the
// store it answers from.
type Server struct {
	opts  Options
	certs *certs
	log   *slog.Logger
}

// New validates o.
func New(o Options) (*Server, error) {
	switch {
	case o.Address == "" || len(o.Hosts) == 0 || o.Client == nil || o.Handler == nil:
		return nil, errors.New("creating the eviction webhook: Address, Hosts, Client and Handler are required")
	case (o.URL == "") == (o.Service == ""):
		return nil, errors.New("creating the eviction webhook: exactly one of URL and Service")
	}
	if _, err := clientConfig(o.URL, o.Service, nil, Path); err != nil {
		return nil, err
	}
	o.ConfigName = cmp.Or(o.ConfigName, "sluice-eviction-floor")
	o.SteerConfigName = cmp.Or(o.SteerConfigName, "sluice-zone-steer")
	o.RenewEvery = cmp.Or(o.RenewEvery, time.Hour)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Server{opts: o, certs: &certs{dir: o.CertDir, hosts: o.Hosts, now: o.Now}, log: o.Logger}, nil
}

// Start implements manager.Runnable: certificates, configuration, then
// serve until ctx ends, renewing the certificates every RenewEvery.
func (s *Server) Start(ctx context.Context) error {
	if _, err := s.certs.renew(); err != nil {
		return err
	}
	if err := s.configure(ctx); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.opts.Address)
	if err != nil {
		return fmt.Errorf("listening for the eviction webhook: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, s.opts.Handler)
	if s.opts.Steer != nil {
		mux.Handle(SteerPath, s.opts.Steer)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.certs.getCertificate}}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	s.log.Info("eviction webhook serving", "address", ln.Addr().String(), "configuration", s.opts.ConfigName)
	t := time.NewTicker(s.opts.RenewEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return srv.Shutdown(sctx)
		case err := <-errc:
			return fmt.Errorf("serving the eviction webhook: %w", err)
		case <-t.C:
			changed, err := s.certs.renew()
			if err != nil {
				s.log.Warn("renewing the eviction webhook certificates failed", "err", err)
				continue
			}
			if changed {
				if err := s.configure(ctx); err != nil {
					s.log.Warn("injecting the new webhook CA failed", "err", err)
				}
			}
		}
	}
}

// configure creates or updates the ValidatingWebhookConfiguration, and
// the MutatingWebhookConfiguration of Steer.
func (s *Server) configure(ctx context.Context) error {
	cc, err := clientConfig(s.opts.URL, s.opts.Service, s.certs.bundle(), Path)
	if err != nil {
		return err
	}
	if s.opts.Steer != nil {
		if err := s.configureSteer(ctx); err != nil {
			return err
		}
	}
	want := webhooks(cc)
	var cur admissionregistrationv1.ValidatingWebhookConfiguration
	err = s.opts.Client.Get(ctx, client.ObjectKey{Name: s.opts.ConfigName}, &cur)
	switch {
	case apierrors.IsNotFound(err):
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: s.opts.ConfigName,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "sluice-controller"}}, Webhooks: want}
		if err := s.opts.Client.Create(ctx, cfg); err != nil {
			return fmt.Errorf("creating webhook configuration %s: %w", s.opts.ConfigName, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading webhook configuration %s: %w", s.opts.ConfigName, err)
	}
	cur.Webhooks = want
	if err := s.opts.Client.Update(ctx, &cur); err != nil {
		return fmt.Errorf("updating webhook configuration %s: %w", s.opts.ConfigName, err)
	}
	return nil
}

// webhooks is the configuration's one webhook: pods/eviction CREATE,
// failurePolicy Ignore (fail open), no side effects.
func webhooks(cc admissionregistrationv1.WebhookClientConfig) []admissionregistrationv1.ValidatingWebhook {
	ignore := admissionregistrationv1.Ignore
	none := admissionregistrationv1.SideEffectClassNone
	equivalent := admissionregistrationv1.Equivalent
	scope := admissionregistrationv1.NamespacedScope
	timeout := int32(5)
	return []admissionregistrationv1.ValidatingWebhook{{
		Name:         WebhookName,
		ClientConfig: cc,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
				Resources: []string{"pods/eviction"}, Scope: &scope},
		}},
		FailurePolicy:           &ignore,
		MatchPolicy:             &equivalent,
		SideEffects:             &none,
		TimeoutSeconds:          &timeout,
		AdmissionReviewVersions: []string{"v1"},
	}}
}

// configureSteer creates or updates the MutatingWebhookConfiguration.
func (s *Server) configureSteer(ctx context.Context) error {
	cc, err := clientConfig(s.opts.URL, s.opts.Service, s.certs.bundle(), SteerPath)
	if err != nil {
		return err
	}
	name := s.opts.SteerConfigName
	want := steerWebhooks(cc)
	var cur admissionregistrationv1.MutatingWebhookConfiguration
	err = s.opts.Client.Get(ctx, client.ObjectKey{Name: name}, &cur)
	switch {
	case apierrors.IsNotFound(err):
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "sluice-controller"}}, Webhooks: want}
		if err := s.opts.Client.Create(ctx, cfg); err != nil {
			return fmt.Errorf("creating webhook configuration %s: %w", name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading webhook configuration %s: %w", name, err)
	}
	cur.Webhooks = want
	if err := s.opts.Client.Update(ctx, &cur); err != nil {
		return fmt.Errorf("updating webhook configuration %s: %w", name, err)
	}
	return nil
}

// SteerWebhookName names the one webhook of the steering configuration.
const SteerWebhookName = "steer.floor.sluice.dev"

// steerWebhooks is the steering configuration's one webhook: CREATE of
// pods carrying pod-template-hash (made by a ReplicaSet), failurePolicy
// Ignore (fail open), no side effects.
func steerWebhooks(cc admissionregistrationv1.WebhookClientConfig) []admissionregistrationv1.MutatingWebhook {
	ignore := admissionregistrationv1.Ignore
	none := admissionregistrationv1.SideEffectClassNone
	equivalent := admissionregistrationv1.Equivalent
	never := admissionregistrationv1.NeverReinvocationPolicy
	scope := admissionregistrationv1.NamespacedScope
	timeout := int32(5)
	return []admissionregistrationv1.MutatingWebhook{{
		Name:         SteerWebhookName,
		ClientConfig: cc,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
				Resources: []string{"pods"}, Scope: &scope},
		}},
		ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "pod-template-hash", Operator: metav1.LabelSelectorOpExists}}},
		FailurePolicy:           &ignore,
		MatchPolicy:             &equivalent,
		SideEffects:             &none,
		ReinvocationPolicy:      &never,
		TimeoutSeconds:          &timeout,
		AdmissionReviewVersions: []string{"v1"},
	}}
}

// clientConfig builds the webhook's clientConfig from URL or Service,
// for the handler at path.
func clientConfig(url, service string, ca []byte, path string) (admissionregistrationv1.WebhookClientConfig, error) {
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: ca}
	if url != "" {
		if !strings.HasPrefix(url, "https://") {
			return cc, fmt.Errorf("eviction webhook URL %q: must start with https://", url)
		}
		u := strings.TrimSuffix(url, "/") + path
		cc.URL = &u
		return cc, nil
	}
	nsName, portText, hasPort := strings.Cut(service, ":")
	ns, name, ok := strings.Cut(nsName, "/")
	port := int32(443)
	if hasPort {
		var p int
		if _, err := fmt.Sscanf(portText, "%d", &p); err != nil || p < 1 || p > 65535 || fmt.Sprint(p) != portText {
			ok = false
		}
		port = int32(p)
	}
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return cc, fmt.Errorf("eviction webhook service %q: want namespace/name or namespace/name:port", service)
	}
	cc.Service = &admissionregistrationv1.ServiceReference{Namespace: ns, Name: name, Path: &path, Port: &port}
	return cc, nil
}
