// Package grpcecho is a small gRPC service for sluice's tests: one method of
// each kind (unary, server streaming, client streaming, bidirectional), with
// messages of the well-known StringValue type, so no generated code is
// needed. Tests run it in process as a backend behind sluice, and call it
// through sluice with the client functions below.
//
// Data flow under test: grpc-go client → sluice (HTTP/2 over TLS or h2c) →
// grpcecho server (h2c or TLS).
package grpcecho

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// ServiceName is the gRPC service the Server registers.
const ServiceName = "sluice.test.Echo"

// Server answers every call with its Name, so a test can tell which
// endpoint served it. It counts calls whose context was canceled by the
// client (through the proxy).
type Server struct {
	Name     string
	Canceled atomic.Int64
	Calls    atomic.Int64
}

// Register adds s to gs.
func (s *Server) Register(gs *grpc.Server) {
	gs.RegisterService(&grpc.ServiceDesc{
		ServiceName: ServiceName,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Unary", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return s.unary(ctx, in)
		}}},
		Streams: []grpc.StreamDesc{
			{StreamName: "ServerStream", ServerStreams: true, Handler: func(_ any, st grpc.ServerStream) error { return s.serverStream(st) }},
			{StreamName: "ClientStream", ClientStreams: true, Handler: func(_ any, st grpc.ServerStream) error { return s.clientStream(st) }},
			{StreamName: "Bidi", ServerStreams: true, ClientStreams: true, Handler: func(_ any, st grpc.ServerStream) error { return s.bidi(st) }},
		},
	}, s)
}

// unary answers "name:value". A value "sleep:D" waits D (or until the call
// ends) first; "fail:N" answers gRPC code N.
func (s *Server) unary(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	s.Calls.Add(1)
	v := in.GetValue()
	grpc.SetTrailer(ctx, metadata.Pairs("served-by", s.Name))
	if d, ok := strings.CutPrefix(v, "sleep:"); ok {
		dur, _ := time.ParseDuration(d)
		select {
		case <-time.After(dur):
		case <-ctx.Done():
			s.Canceled.Add(1)
			return nil, ctx.Err()
		}
	}
	if c, ok := strings.CutPrefix(v, "fail:"); ok {
		n, _ := strconv.Atoi(c)
		return nil, status.Error(codes.Code(n), "asked to fail")
	}
	return wrapperspb.String(s.Name + ":" + v), nil
}

// serverStream sends N messages for a request "N" or "N/D", D apart.
func (s *Server) serverStream(st grpc.ServerStream) error {
	s.Calls.Add(1)
	in := new(wrapperspb.StringValue)
	if err := st.RecvMsg(in); err != nil {
		return err
	}
	ns, ds, _ := strings.Cut(in.GetValue(), "/")
	n, _ := strconv.Atoi(ns)
	gap, _ := time.ParseDuration(ds)
	for i := range n {
		if i > 0 && gap > 0 {
			select {
			case <-time.After(gap):
			case <-st.Context().Done():
				s.Canceled.Add(1)
				return st.Context().Err()
			}
		}
		if err := st.SendMsg(wrapperspb.String(fmt.Sprintf("%s:%d", s.Name, i))); err != nil {
			return err
		}
	}
	st.SetTrailer(metadata.Pairs("served-by", s.Name))
	return nil
}

// clientStream answers "name:count:concatenation" once the client is done.
func (s *Server) clientStream(st grpc.ServerStream) error {
	s.Calls.Add(1)
	var b strings.Builder
	n := 0
	for {
		in := new(wrapperspb.StringValue)
		err := st.RecvMsg(in)
		if err == io.EOF {
			break
		}
		if err != nil {
			if st.Context().Err() != nil {
				s.Canceled.Add(1)
			}
			return err
		}
		n++
		b.WriteString(in.GetValue())
	}
	return st.SendMsg(wrapperspb.String(fmt.Sprintf("%s:%d:%s", s.Name, n, b.String())))
}

// bidi answers each message with "name:message" as it arrives.
func (s *Server) bidi(st grpc.ServerStream) error {
	s.Calls.Add(1)
	for {
		in := new(wrapperspb.StringValue)
		err := st.RecvMsg(in)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if st.Context().Err() != nil {
				s.Canceled.Add(1)
			}
			return err
		}
		if err := st.SendMsg(wrapperspb.String(s.Name + ":" + in.GetValue())); err != nil {
			return err
		}
	}
}

// Unary calls the unary method; the answer and the served-by trailer.
func Unary(ctx context.Context, cc grpc.ClientConnInterface, v string) (string, error) {
	out := new(wrapperspb.StringValue)
	if err := cc.Invoke(ctx, "/"+ServiceName+"/Unary", wrapperspb.String(v), out); err != nil {
		return "", err
	}
	return out.GetValue(), nil
}

// Stream opens a stream of method "ServerStream", "ClientStream" or "Bidi".
func Stream(ctx context.Context, cc grpc.ClientConnInterface, method string) (grpc.ClientStream, error) {
	desc := &grpc.StreamDesc{StreamName: method, ServerStreams: method != "ClientStream", ClientStreams: method != "ServerStream"}
	return cc.NewStream(ctx, desc, "/"+ServiceName+"/"+method)
}

// Send and Recv move one StringValue on a stream.
func Send(st grpc.ClientStream, v string) error { return st.SendMsg(wrapperspb.String(v)) }

// Recv receives one message.
func Recv(st grpc.ClientStream) (string, error) {
	m := new(wrapperspb.StringValue)
	if err := st.RecvMsg(m); err != nil {
		return "", err
	}
	return m.GetValue(), nil
}

// Exercise makes one call of each kind on cc and checks the answers come
// from a server whose name starts with prefix: unary (and a failing unary,
// whose status must arrive intact), server streaming with its trailer,
// client streaming and bidirectional. It returns the first problem.
func Exercise(ctx context.Context, cc grpc.ClientConnInterface, prefix string) error {
	got, err := Unary(ctx, cc, "hi")
	if err != nil || !strings.HasPrefix(got, prefix) || !strings.HasSuffix(got, ":hi") {
		return fmt.Errorf("unary: %q, %w", got, err)
	}
	if _, err := Unary(ctx, cc, "fail:5"); status.Code(err) != codes.NotFound {
		return fmt.Errorf("unary asked to fail with NOT_FOUND: %w", err)
	}

	var trailer metadata.MD
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{StreamName: "ServerStream", ServerStreams: true},
		"/"+ServiceName+"/ServerStream", grpc.Trailer(&trailer))
	if err != nil {
		return fmt.Errorf("server stream: %w", err)
	}
	if err := Send(st, "3"); err != nil {
		return fmt.Errorf("server stream: %w", err)
	}
	st.CloseSend()
	n := 0
	for ; ; n++ {
		if _, err := Recv(st); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("server stream message %d: %w", n, err)
		}
	}
	if n != 3 || len(trailer.Get("served-by")) != 1 {
		return fmt.Errorf("server stream: %d messages, trailer %v", n, trailer)
	}

	st, err = Stream(ctx, cc, "ClientStream")
	if err != nil {
		return fmt.Errorf("client stream: %w", err)
	}
	for _, v := range []string{"x", "y", "z"} {
		if err := Send(st, v); err != nil {
			return fmt.Errorf("client stream: %w", err)
		}
	}
	st.CloseSend()
	if m, err := Recv(st); err != nil || !strings.HasSuffix(m, ":3:xyz") {
		return fmt.Errorf("client stream: %q, %w", m, err)
	}

	st, err = Stream(ctx, cc, "Bidi")
	if err != nil {
		return fmt.Errorf("bidi: %w", err)
	}
	for _, v := range []string{"1", "2"} {
		if err := Send(st, v); err != nil {
			return fmt.Errorf("bidi: %w", err)
		}
		if m, err := Recv(st); err != nil || !strings.HasSuffix(m, ":"+v) {
			return fmt.Errorf("bidi %s: %q, %w", v, m, err)
		}
	}
	st.CloseSend()
	if _, err := Recv(st); err != io.EOF {
		return fmt.Errorf("bidi end: %w", err)
	}
	return nil
}
