// Command echobasic is the backend of the Gateway API conformance suite as a
// local binary: `make conformance` maps the suite's echo image
// (registry.k8s.io/gateway-api/echo-basic) to it, so the suite's backends
// run as process-kubelet pods of test/cluster. It answers with the JSON
// contract the suite reads (sigs.k8s.io/gateway-api/conformance/utils/
// roundtripper.CapturedRequest): path, host, method, proto, headers,
// httpPort, namespace, pod and, over TLS, the connection's TLS facts; and
// it prints "Echoing back request made to PATH to client (ADDR)" for each,
// where the suite looks for mirrored requests (the pod's log).
// With GRPC_ECHO_SERVER set it serves the suite's gRPC echo service
// instead (the module's generated grpcecho stubs; our own server).
//
// Pods of a simulated node share its network namespace, so every listener
// binds the pod's own address (POD_IP, which the conformance runner adds to
// the suite's echo pods) rather than all addresses.
//
// Given coredns's -conf flag (the image of the suite's DNS server maps here
// too) it serves nothing until stopped.
//
// Environment, as the suite's manifests set it: POD_NAME, NAMESPACE,
// SERVICE_NAME, INGRESS_NAME; HTTP_PORT (3000), H2C_PORT (3001),
// HTTPS_PORT (8443) with TLS_SERVER_CERT, TLS_SERVER_PRIVKEY and
// optionally TLS_CLIENT_CACERTS; GRPC_ECHO_SERVER.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// podContext is where the echo runs, as the suite reads it back.
type podContext struct {
	Namespace string `json:"namespace"`
	Ingress   string `json:"ingress"`
	Service   string `json:"service"`
	Pod       string `json:"pod"`
}

// echoed is the answer to every echo request.
type echoed struct {
	Path     string              `json:"path"`
	Host     string              `json:"host"`
	Method   string              `json:"method"`
	Proto    string              `json:"proto"`
	Headers  map[string][]string `json:"headers"`
	HTTPPort string              `json:"httpPort"`
	podContext
	TLS *tlsFacts `json:"tls,omitempty"`
}

type tlsFacts struct {
	Version            string   `json:"version"`
	PeerCertificates   []string `json:"peerCertificates,omitempty"`
	ServerName         string   `json:"serverName"`
	NegotiatedProtocol string   `json:"negotiatedProtocol,omitempty"`
	CipherSuite        string   `json:"cipherSuite"`
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	pc := podContext{Namespace: os.Getenv("NAMESPACE"), Ingress: os.Getenv("INGRESS_NAME"),
		Service: os.Getenv("SERVICE_NAME"), Pod: os.Getenv("POD_NAME")}
	ip := os.Getenv("POD_IP")
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "-conf":
		// Started as the suite's coredns (UDPRoute tests only, which the
		// HTTP and GRPC profiles do not run): stay up, serve nothing.
		log.Info("standing in for coredns: serving nothing")
		<-ctx.Done()
	case os.Getenv("GRPC_ECHO_SERVER") != "":
		err = serveGRPC(ctx, ip, pc, log)
	default:
		err = serveHTTP(ctx, ip, pc, log)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("echobasic", "err", err)
		os.Exit(1)
	}
}

// serveHTTP runs the HTTP/1.1, h2c and (with a certificate) HTTPS
// listeners until ctx ends or one fails.
func serveHTTP(ctx context.Context, ip string, pc podContext, log *slog.Logger) error {
	port := env("HTTP_PORT", "3000")
	h := &handler{ctx: pc, port: port}
	errs := make(chan error, 3)
	var servers []*http.Server
	start := func(s *http.Server, certFile, keyFile string) {
		servers = append(servers, s)
		go func() {
			log.Info("listening", "addr", s.Addr, "tls", certFile != "")
			if certFile != "" {
				errs <- s.ListenAndServeTLS(certFile, keyFile)
				return
			}
			errs <- s.ListenAndServe()
		}()
	}
	start(&http.Server{Addr: net.JoinHostPort(ip, port), Handler: h, ReadHeaderTimeout: 10 * time.Second}, "", "")
	h2c := new(http.Protocols)
	h2c.SetHTTP1(true)
	h2c.SetUnencryptedHTTP2(true)
	start(&http.Server{Addr: net.JoinHostPort(ip, env("H2C_PORT", "3001")), Handler: h2cOnly(h), Protocols: h2c, ReadHeaderTimeout: 10 * time.Second}, "", "")
	if cert, key := os.Getenv("TLS_SERVER_CERT"), os.Getenv("TLS_SERVER_PRIVKEY"); cert != "" && key != "" {
		cfg, err := clientCAs(os.Getenv("TLS_CLIENT_CACERTS"))
		if err != nil {
			return err
		}
		start(&http.Server{Addr: net.JoinHostPort(ip, env("HTTPS_PORT", "8443")), Handler: h, TLSConfig: cfg, ReadHeaderTimeout: 10 * time.Second}, cert, key)
	}
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
	}
	for _, s := range servers {
		_ = s.Close()
	}
	return nil
}

// clientCAs is the TLS configuration that asks for (and, when given,
// verifies) client certificates signed by the CAs in file ("": none).
func clientCAs(file string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if file == "" {
		return cfg, nil
	}
	pemData, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading client CAs: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, fmt.Errorf("no certificate in %s", file)
	}
	cfg.ClientAuth, cfg.ClientCAs = tls.VerifyClientCertIfGiven, pool
	return cfg, nil
}

// h2cOnly refuses requests that are neither HTTP/2 nor an h2c upgrade.
func h2cOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 && r.Header.Get("Upgrade") != "h2c" {
			http.Error(w, "Expected h2c request", http.StatusBadRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

type handler struct {
	ctx  podContext
	port string
	out  io.Writer // where each echoed request is logged; nil: stdout
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.ReplaceAll(r.URL.Path, "//", "/")
	switch {
	case path == "/health":
		_, _ = w.Write([]byte("OK"))
		return
	case strings.HasPrefix(path, "/status/"):
		code, err := strconv.Atoi(strings.TrimPrefix(r.RequestURI, "/status/"))
		if err != nil || code < 100 || code > 999 {
			code = http.StatusBadRequest
		}
		w.WriteHeader(code)
		return
	}
	// The suite finds mirrored requests in the pod's log by this line
	// (its GetMirrorLogRegexp), printed as the upstream echo-basic does:
	// one write per request, so that concurrent ones do not interleave.
	out := h.out
	if out == nil {
		out = os.Stdout
	}
	fmt.Fprintf(out, "Echoing back request made to %s to client (%s)\n", r.RequestURI, r.RemoteAddr)
	if d := r.URL.Query().Get("delay"); d != "" {
		t, err := time.ParseDuration(d)
		if err != nil {
			writeError(w, err)
			return
		}
		select {
		case <-time.After(t):
		case <-r.Context().Done():
			return
		}
	}
	body, err := json.MarshalIndent(echoed{Path: r.RequestURI, Host: r.Host, Method: r.Method, Proto: r.Proto,
		Headers: r.Header, HTTPPort: h.port, podContext: h.ctx, TLS: tlsOf(r.TLS)}, "", " ")
	if err != nil {
		writeError(w, err)
		return
	}
	setEchoHeaders(w.Header(), r.Header.Values("X-Echo-Set-Header"))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(body)
}

// setEchoHeaders sets the response headers a request asks for in
// X-Echo-Set-Header values ("Name: value, Other: value"); a name given
// twice gets both values joined with a comma.
func setEchoHeaders(out http.Header, asks []string) {
	for _, ask := range asks {
		for kv := range strings.SplitSeq(ask, ",") {
			name, value, _ := strings.Cut(strings.TrimSpace(kv), ":")
			if name == "" {
				continue
			}
			if cur := out[name]; len(cur) > 0 {
				cur[0] += "," + strings.TrimSpace(value)
				continue
			}
			out[name] = []string{value}
		}
	}
}

func writeError(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusInternalServerError)
	body, _ := json.Marshal(map[string]string{"message": err.Error()})
	_, _ = w.Write(body)
}

func tlsOf(cs *tls.ConnectionState) *tlsFacts {
	if cs == nil {
		return nil
	}
	f := &tlsFacts{Version: tlsVersion(cs.Version), ServerName: cs.ServerName,
		NegotiatedProtocol: cs.NegotiatedProtocol, CipherSuite: tls.CipherSuiteName(cs.CipherSuite)}
	for _, c := range cs.PeerCertificates {
		f.PeerCertificates = append(f.PeerCertificates, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})))
	}
	return f
}

func tlsVersion(v uint16) string {
	switch v {
	case tls.VersionTLS13:
		return "TLSv1.3"
	case tls.VersionTLS12:
		return "TLSv1.2"
	case tls.VersionTLS11:
		return "TLSv1.1"
	case tls.VersionTLS10:
		return "TLSv1.0"
	}
	return ""
}
