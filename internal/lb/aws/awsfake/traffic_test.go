package awsfake

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
)

// named is an HTTP backend answering its name on every path.
func named(t *testing.T, name string) netip.AddrPort {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) }))
	t.Cleanup(s.Close)
	return netip.MustParseAddrPort(s.Listener.Addr().String())
}

// conn is a keep-alive HTTP client connection through the listener.
type conn struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &conn{c: c, r: bufio.NewReader(c)}
}

// get sends one request on the connection and returns the body.
func (c *conn) get() (string, error) {
	c.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c.c, "GET / HTTP/1.1\r\nHost: lb\r\n\r\n"); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// newConns opens n connections and counts which backend each reached.
func newConns(t *testing.T, addr string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		// A node that resets may do so before connect returns: that is a
		// failed connection too.
		name := "error"
		if c, err := net.Dial("tcp", addr); err == nil {
			cn := &conn{c: c, r: bufio.NewReader(c)}
			if body, err := cn.get(); err == nil {
				name = body
			}
			c.Close()
		}
		got[name]++
	}
	return got
}

func setup(t *testing.T, tg TargetGroup, speed float64) (*Fake, string, string, map[string]netip.AddrPort) {
	t.Helper()
	f := start(t, speed)
	tg.Listen, tg.Name = true, "traffic"
	tg.HealthCheckInterval, tg.HealthyThreshold = 5*time.Second, 1
	arn, err := f.AddTargetGroup(tg)
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := f.Listener(arn)
	if !ok {
		t.Fatal("no listener")
	}
	backends := map[string]netip.AddrPort{"a": named(t, "a"), "b": named(t, "b")}
	var descs []types.TargetDescription
	for _, ap := range backends {
		descs = append(descs, desc(ap))
	}
	if _, err := sdk(f).RegisterTargets(context.Background(), &elbv2.RegisterTargetsInput{TargetGroupArn: &arn, Targets: descs}); err != nil {
		t.Fatal(err)
	}
	// Both targets share 127.0.0.1: count by state.
	deadline := time.Now().Add(30 * time.Second)
	for {
		healthy := 0
		for _, s := range f.Targets(arn) {
			if s.State == stateHealthy {
				healthy++
			}
		}
		if healthy == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("targets %+v", f.Targets(arn))
		}
		time.Sleep(5 * time.Millisecond)
	}
	return f, arn, addr, backends
}

func deregister(t *testing.T, f *Fake, arn string, ap netip.AddrPort) {
	t.Helper()
	if _, err := sdk(f).DeregisterTargets(context.Background(), &elbv2.DeregisterTargetsInput{TargetGroupArn: &arn,
		Targets: []types.TargetDescription{desc(ap)}}); err != nil {
		t.Fatal(err)
	}
}

func stateOf(f *Fake, arn string, ap netip.AddrPort) string {
	for _, s := range f.Targets(arn) {
		if s.Port == int(ap.Port()) {
			return s.State
		}
	}
	return ""
}

// TestNLBDeregistration follows one deregistered target through NLB's
// phases: new connections still reach it during the window; after the
// window (while it still drains) they do not, though its old connection
// still works; at the end of the delay that connection is reset and the
// target is gone.
func TestNLBDeregistration(t *testing.T) {
	// At 20×: window 3s, delay 6s of real time.
	f, arn, addr, be := setup(t, TargetGroup{NewConnectionWindow: 60 * time.Second, DeregistrationDelay: 120 * time.Second}, 20)
	got := newConns(t, addr, 4)
	if got["a"] != 2 || got["b"] != 2 {
		t.Fatalf("before: %v, want 2 each (round robin)", got)
	}
	var old *conn
	for old == nil {
		c := dial(t, addr)
		if name, err := c.get(); err == nil && name == "a" {
			old = c
		}
	}
	deregister(t, f, arn, be["a"])
	if got := newConns(t, addr, 4); got["a"] == 0 || got["error"] != 0 {
		t.Fatalf("within the window: %v, want some new connections to a", got)
	}
	// After the window: a is still draining, but new connections skip it.
	phase2 := 0
	for {
		got := newConns(t, addr, 4)
		if got["a"] == 0 {
			if got["b"] != 4 {
				t.Fatalf("after the window: %v", got)
			}
			if s := stateOf(f, arn, be["a"]); s != stateDraining {
				t.Fatalf("new connections stopped while a is %q, want draining", s)
			}
			phase2++
			if phase2 == 3 {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if name, err := old.get(); err != nil || name != "a" {
		t.Fatalf("existing connection during drain: %q, %v", name, err)
	}
	// End of the delay: the old connection is reset, a is gone.
	var err error
	for err == nil {
		time.Sleep(50 * time.Millisecond)
		_, err = old.get()
	}
	if s := stateOf(f, arn, be["a"]); s != "" {
		t.Fatalf("connection reset while a is %q, want gone", s)
	}
	var ne net.Error
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !strings.Contains(err.Error(), "reset") && !(errors.As(err, &ne) && !ne.Timeout()) {
		t.Fatalf("old connection ended with %v, want a reset", err)
	}
	if got := newConns(t, addr, 4); got["b"] != 4 {
		t.Fatalf("after: %v", got)
	}
}

// TestALBDeregistration: request-level balancing stops new requests to a
// deregistered target at once, even on an existing client connection.
func TestALBDeregistration(t *testing.T) {
	f, arn, addr, be := setup(t, TargetGroup{Protocol: "HTTP", DeregistrationDelay: 300 * time.Second}, 20)
	c := dial(t, addr)
	got := map[string]int{}
	for range 4 {
		name, err := c.get()
		if err != nil {
			t.Fatal(err)
		}
		got[name]++
	}
	if got["a"] != 2 || got["b"] != 2 {
		t.Fatalf("before: %v", got)
	}
	deregister(t, f, arn, be["a"])
	for range 6 {
		if name, err := c.get(); err != nil || name != "b" {
			t.Fatalf("after deregistration: %q, %v; want b", name, err)
		}
	}
	if s := stateOf(f, arn, be["a"]); s != stateDraining {
		t.Fatalf("a is %q", s)
	}
}

func TestTrafficOnlyToAllowedNetworks(t *testing.T) {
	for _, s := range []string{"127.0.0.1", "127.255.0.9", "10.244.3.4", "::ffff:127.0.0.1"} {
		if !Allowed(netip.MustParseAddr(s)) {
			t.Errorf("%s refused", s)
		}
	}
	for _, s := range []string{"10.245.0.1", "192.0.2.1", "8.8.8.8", "::1", "169.254.169.254"} {
		if Allowed(netip.MustParseAddr(s)) {
			t.Errorf("%s allowed", s)
		}
	}
	f := start(t, 1)
	if _, err := f.dial(context.Background(), "tcp", "192.0.2.1:80"); !errors.Is(err, errNotAllowed) {
		t.Fatalf("dial outside: %v", err)
	}
	if err := f.AddInstance("i-1", netip.MustParseAddr("192.0.2.1")); err == nil {
		t.Fatal("instance outside the allowed networks accepted")
	}
	if _, err := New(Options{Networks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}); err == nil {
		t.Fatal("network wider than 10.244.0.0/16 accepted")
	}
	lo, err := New(Options{Networks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if err != nil {
		t.Fatal(err)
	}
	defer lo.Close()
	if err := lo.AddInstance("i-2", netip.MustParseAddr("10.244.1.1")); err == nil {
		t.Fatal("instance outside Options.Networks accepted")
	}
}
