package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	pb "sigs.k8s.io/gateway-api/conformance/echo-basic/grpcechoserver"
	"sigs.k8s.io/gateway-api/conformance/utils/roundtripper"
)

// The answer decodes into the suite's own CapturedRequest with what was
// sent and where it ran.
func TestEchoContract(t *testing.T) {
	srv := httptest.NewServer(&handler{ctx: podContext{Namespace: "ns1", Pod: "pod-1"}, port: "3000"})
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/a/b?x=1", nil)
	req.Host = "example.test"
	req.Header.Set("X-One", "1")
	req.Header.Add("X-Echo-Set-Header", "X-Back: a, X-Back: b")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got roundtripper.CapturedRequest
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Path != "/a/b?x=1" || got.Host != "example.test" || got.Method != "PUT" || got.Protocol != "HTTP/1.1" ||
		got.Namespace != "ns1" || got.Pod != "pod-1" || got.HTTPPort != "3000" || got.Headers["X-One"][0] != "1" {
		t.Errorf("captured %+v", got)
	}
	if v := resp.Header.Get("X-Back"); v != "a,b" {
		t.Errorf("X-Back = %q, want a,b", v)
	}
}

func TestStatusAndHealth(t *testing.T) {
	srv := httptest.NewServer(&handler{port: "3000"})
	defer srv.Close()
	for path, want := range map[string]int{"/status/418": 418, "/status/x": 400, "/health": 200} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// The gRPC echo answers Echo and EchoTwo with the method, authority and
// metadata; EchoThree is unimplemented.
func TestGRPCEcho(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterGrpcEchoServer(s, &grpcEcho{ctx: &pb.Context{Namespace: "ns1", Pod: "pod-1"}})
	go func() { _ = s.Serve(l) }()
	defer s.Stop()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewGrpcEchoClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-one", "1")
	resp, err := c.EchoTwo(ctx, &pb.EchoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	a := resp.GetAssertions()
	if a.GetFullyQualifiedMethod() != "/"+grpcService+"/EchoTwo" || a.GetAuthority() != l.Addr().String() || a.GetContext().GetPod() != "pod-1" {
		t.Errorf("assertions %v", a)
	}
	found := false
	for _, h := range a.GetHeaders() {
		found = found || (h.GetKey() == "x-one" && h.GetValue() == "1")
	}
	if !found {
		t.Errorf("x-one not echoed: %v", a.GetHeaders())
	}
	if _, err := c.EchoThree(ctx, &pb.EchoRequest{}); err == nil {
		t.Error("EchoThree answered")
	}
}
