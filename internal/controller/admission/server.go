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
	// ConfigName is the ValidatingWebhookConfiguration whose caBundle the
	// server keeps current. Default "sluice-eviction-floor".
	ConfigName string
	// CreateConfigurations: the server creates the configurations and
	// keeps their webhooks (rules, selectors, clientConfig) as this
	// package defines them. False (the Helm chart, which creates them):
	// it only patches its webhook's caBundle in the existing ones.
	CreateConfigurations bool
	// Namespaces limits the webhooks of configurations the server creates
	// to these namespaces (a namespaceSelector); empty or "*": every
	// namespace.
	Namespaces []string
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
	// the server keeps the caBundle of the MutatingWebhookConfiguration
	// SteerConfigName (default "sluice-zone-steer") current too.
	Steer           http.Handler
	SteerConfigName string
	// RenewEvery is how often the certificates are checked for renewal.
	// Default 1h.
	RenewEvery time.Duration
	// RecheckEvery is how often the server checks that the caBundles
	// still hold its CA (another replica may have dropped it, bundle.go).
	// Default 1m.
	RecheckEvery time.Duration
	// Logger: nil discards.
	Logger *slog.Logger
	// Now is the clock of the certificates. Nil: time.Now.
	Now func() time.Time
}

// Server serves the webhook over HTTPS with its own certificate and keeps
// the webhook configuration's caBundle holding its CA. It is a
// controller-runtime Runnable that runs on every replica, leader or not
// (its handlers read snapshots every replica can build), so that no review
// depends on which pod the Service picks.
type Server struct {
	opts  Options
	certs *certs
	log   *slog.Logger
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: false,
// every replica serves.
func (s *Server) NeedLeaderElection() bool { return false }

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
	o.RecheckEvery = cmp.Or(o.RecheckEvery, time.Minute)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Server{opts: o, certs: &certs{dir: o.CertDir, hosts: o.Hosts, now: o.Now}, log: o.Logger}, nil
}

// Start implements manager.Runnable: certificates, then serve until ctx
// ends, renewing the certificates every RenewEvery. The CA goes into the
// configurations' caBundles once serving, retried with backoff while it
// fails (the chart may create them after the controller starts; until
// then the API server's calls fail and the webhooks fail open), and is
// checked to be there every RecheckEvery.
func (s *Server) Start(ctx context.Context) error {
	if _, err := s.certs.renew(); err != nil {
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
	retry := time.NewTimer(0) // configure at once
	defer retry.Stop()
	backoff := time.Second
	injected := false
	for {
		select {
		case <-retry.C:
			if err := s.configure(ctx); err != nil {
				s.log.Warn("injecting the webhook CA failed; retrying", "err", err, "in", backoff)
				retry.Reset(backoff)
				backoff = min(2*backoff, time.Minute)
				continue
			}
			if !injected {
				s.log.Info("webhook CA injected", "configuration", s.opts.ConfigName)
			}
			injected, backoff = true, time.Second
			retry.Reset(s.opts.RecheckEvery)
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
				backoff = time.Second
				retry.Reset(0)
			}
		}
	}
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
