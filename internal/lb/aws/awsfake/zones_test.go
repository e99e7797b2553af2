package awsfake

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
)

// sick is a backend answering its name, or 503 on every path while down.
func sick(t *testing.T, name string, down *atomic.Bool) netip.AddrPort {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		io.WriteString(w, name)
	}))
	t.Cleanup(s.Close)
	return netip.MustParseAddrPort(s.Listener.Addr().String())
}

func TestCrossZoneOff(t *testing.T) {
	f := start(t, 50)
	arn, err := f.AddTargetGroup(TargetGroup{Name: "zonal", Listen: true, CrossZoneOff: true, Protocol: "TCP",
		HealthCheckInterval: 5 * time.Second, HealthyThreshold: 1, UnhealthyThreshold: 1, NewConnectionWindow: -1,
		HealthCheckPath: "/", DeregistrationDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var downA, downB atomic.Bool
	a, b := sick(t, "a", &downA), sick(t, "b", &downB)
	reg := func(ap netip.AddrPort, zone string) {
		d := desc(ap)
		d.AvailabilityZone = aws.String(zone)
		if _, err := sdk(f).RegisterTargets(context.Background(), &elbv2.RegisterTargetsInput{TargetGroupArn: &arn, Targets: []types.TargetDescription{d}}); err != nil {
			t.Fatal(err)
		}
	}
	reg(a, "us-east-1a")
	reg(b, "us-east-1b")
	healthy := func(want int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			n := 0
			for _, s := range f.Targets(arn) {
				if s.State == stateHealthy {
					n++
				}
			}
			if n == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("want %d healthy: %+v", want, f.Targets(arn))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	healthy(2)
	node := func(zone string) string {
		addr, ok := f.ZoneListener(arn, zone)
		if !ok {
			t.Fatalf("no node in %s", zone)
		}
		return addr
	}
	// Each zone's node sends only to its own zone; an empty zone resets.
	if got := newConns(t, node("us-east-1a"), 6); got["a"] != 6 {
		t.Fatalf("zone a: %v", got)
	}
	if got := newConns(t, node("us-east-1b"), 6); got["b"] != 6 {
		t.Fatalf("zone b: %v", got)
	}
	if got := newConns(t, node("us-east-1c"), 3); got["error"] != 3 {
		t.Fatalf("empty zone c: %v", got)
	}
	if _, ok := f.ZoneListener(arn, "mars-1a"); ok {
		t.Fatal("node in an unknown zone")
	}
	// Zone b without a healthy target: its clients get resets.
	downB.Store(true)
	healthy(1)
	if got := newConns(t, node("us-east-1b"), 3); got["error"] != 3 {
		t.Fatalf("unhealthy zone b: %v", got)
	}
	// Every zone unhealthy: every node fails open to every target.
	downA.Store(true)
	healthy(0)
	if got := newConns(t, node("us-east-1c"), 4); got["a"]+got["b"] != 4 {
		t.Fatalf("fail open: %v", got)
	}
}
