package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	pb "sigs.k8s.io/gateway-api/conformance/echo-basic/grpcechoserver"
)

// grpcService is the full name of the suite's echo service.
const grpcService = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho"

// grpcEcho answers Echo and EchoTwo with what it was sent (EchoThree stays
// unimplemented, as the suite expects).
type grpcEcho struct {
	pb.UnimplementedGrpcEchoServer
	ctx *pb.Context
}

func (s *grpcEcho) Echo(ctx context.Context, _ *pb.EchoRequest) (*pb.EchoResponse, error) {
	return s.echo(ctx, "Echo")
}

func (s *grpcEcho) EchoTwo(ctx context.Context, _ *pb.EchoRequest) (*pb.EchoResponse, error) {
	return s.echo(ctx, "EchoTwo")
}

func (s *grpcEcho) echo(ctx context.Context, method string) (*pb.EchoResponse, error) {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return nil, fmt.Errorf("no metadata in the request")
	}
	a := &pb.Assertions{FullyQualifiedMethod: "/" + grpcService + "/" + method, Context: s.ctx}
	for k, vs := range md {
		for _, v := range vs {
			if k == ":authority" {
				a.Authority = v
			}
			a.Headers = append(a.Headers, &pb.Header{Key: k, Value: v})
		}
	}
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			f := tlsOf(&info.State)
			a.TlsAssertions = &pb.TLSAssertions{Version: f.Version, NegotiatedProtocol: f.NegotiatedProtocol,
				ServerName: f.ServerName, CipherSuite: f.CipherSuite, PeerCertificates: f.PeerCertificates}
		}
	}
	return &pb.EchoResponse{Assertions: a}, nil
}

// serveGRPC runs the echo service in plain text on HTTP_PORT and, with a
// certificate, over TLS on HTTPS_PORT.
func serveGRPC(ctx context.Context, ip string, pc podContext, log *slog.Logger) error {
	pctx := &pb.Context{Namespace: pc.Namespace, Ingress: pc.Ingress, ServiceName: pc.Service, Pod: pc.Pod}
	errs := make(chan error, 2)
	var servers []*grpc.Server
	start := func(port string, opts ...grpc.ServerOption) error {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, port))
		if err != nil {
			return fmt.Errorf("listening for gRPC: %w", err)
		}
		s := grpc.NewServer(opts...)
		pb.RegisterGrpcEchoServer(s, &grpcEcho{ctx: pctx})
		servers = append(servers, s)
		log.Info("listening", "addr", l.Addr().String(), "grpc", true, "tls", len(opts) > 0)
		go func() { errs <- s.Serve(l) }()
		return nil
	}
	if err := start(env("HTTP_PORT", "3000")); err != nil {
		return err
	}
	if cert, key := env("TLS_SERVER_CERT", ""), env("TLS_SERVER_PRIVKEY", ""); cert != "" && key != "" {
		kp, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return fmt.Errorf("loading the gRPC server certificate: %w", err)
		}
		creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12})
		if err := start(env("HTTPS_PORT", "8443"), grpc.Creds(creds)); err != nil {
			return err
		}
	}
	defer func() {
		for _, s := range servers {
			s.Stop()
		}
	}()
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
		return nil
	}
}
