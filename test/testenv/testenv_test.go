package testenv

import (
	"net"
	"strconv"
	"testing"
	"time"
)

func TestPortIsFreeAndBelowEphemeral(t *testing.T) {
	p := FreePort(t, "127.0.0.1")
	if p < minPort || p >= ephemeralLow() {
		t.Errorf("port %d outside [%d, %d)", p, minPort, ephemeralLow())
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		t.Fatalf("port %d not free: %v", p, err)
	}
	l.Close()
}

func TestStopEndsProcessByPID(t *testing.T) {
	p := Start(t, Spec{Name: "sleep", Path: "/bin/sleep", Args: []string{"600"}, StopGrace: time.Second})
	if p.Exited() {
		t.Fatal("sleep exited at once")
	}
	p.Stop(time.Second) // SIGTERM ends sleep
	if !p.Exited() {
		t.Fatal("still running after Stop")
	}
	if code := p.Wait(0); code != -1 {
		t.Errorf("exit code %d, want -1 (killed by a signal)", code)
	}
}

// No port is handed out twice in one process: 300 random picks from the
// ~12,000 ports below the ephemeral range would repeat one (97%). Not
// more: a process running the tests 20 times (-count=20) must not use up
// the range, which the other test checks.
func TestPortNeverHandedOutTwice(t *testing.T) {
	seen := map[int]bool{}
	for range 300 {
		p := FreePort(t, "127.0.0.1")
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}

func TestMetricSum(t *testing.T) {
	text := `# HELP sluice_client_timeouts_total x
sluice_client_timeouts_total{timeout="read_header"} 3
sluice_client_timeouts_total{timeout="write_idle"} 2
sluice_client_timeouts_total_other 9
sluice_endpoints_refused 4
`
	for _, tc := range []struct {
		name, label string
		want        float64
	}{
		{"sluice_client_timeouts_total", "", 5},
		{"sluice_client_timeouts_total", `timeout="write_idle"`, 2},
		{"sluice_endpoints_refused", "", 4},
		{"sluice_missing", "", 0},
	} {
		if got, err := MetricSum(text, tc.name, tc.label); err != nil || got != tc.want {
			t.Errorf("MetricSum(%s, %q) = %v, %v; want %v", tc.name, tc.label, got, err, tc.want)
		}
	}
	if _, err := MetricSum("sluice_x nope\n", "sluice_x", ""); err == nil {
		t.Error("MetricSum of an unparsable sample: no error")
	}
}
