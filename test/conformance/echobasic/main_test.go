package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	pb "sigs.k8s.io/gateway-api/conformance/echo-basic/grpcechoserver"
	suitehttp "sigs.k8s.io/gateway-api/conformance/utils/http"
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

// TestMirrorLogLine: every echoed request prints the upstream echo-basic's
// line, in which the suite's own GetMirrorLogRegexp finds a mirrored
// request by its path; health and status requests print nothing.
func TestMirrorLogLine(t *testing.T) {
	var out bytes.Buffer
	h := &handler{port: "3000", out: &out}
	for _, target := range []string{"/health", "/status/503", "/mirror", "/mirror-and-modify-headers?x=1&y=(2)"} {
		req := httptest.NewRequest(http.MethodGet, target, nil)
		req.RemoteAddr = "10.0.0.7:41234"
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	want := "Echoing back request made to /mirror to client (10.0.0.7:41234)\n" +
		"Echoing back request made to /mirror-and-modify-headers?x=1&y=(2) to client (10.0.0.7:41234)\n"
	if out.String() != want {
		t.Fatalf("logged %q, want %q", out.String(), want)
	}
	lines := strings.SplitAfter(out.String(), "\n")
	for i, path := range []string{"/mirror", "/mirror-and-modify-headers?x=1&y=(2)"} {
		if !suitehttp.GetMirrorLogRegexp(path).MatchString(lines[i]) {
			t.Errorf("the suite's regexp for %s does not match %q", path, lines[i])
		}
	}
	if suitehttp.GetMirrorLogRegexp("/other").MatchString(out.String()) {
		t.Error("the suite's regexp for a path never requested matched")
	}
}
