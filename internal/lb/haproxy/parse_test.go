package haproxy

import (
	"errors"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/lb"
)

// The testdata files are answers of HAProxy 2.6.12 (Debian) for a backend
// holding a static server in maintenance, a draining server with two slow
// requests, servers failing checks (503, connection refused) and a foreign
// server.

func TestParseServersStateGolden(t *testing.T) {
	b, err := os.ReadFile("testdata/show-servers-state.txt")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parseServersState(string(b))
	if err != nil {
		t.Fatal(err)
	}
	want := []stateRow{
		{"be", "static1", netip.MustParseAddr("127.0.0.1"), 1, 5, 7, 0},
		{"be", "sluice-127-0-0-1-18081", netip.MustParseAddr("127.0.0.1"), 18081, 8, 3, 0},
		{"be", "sluice-127-0-0-1-18082", netip.MustParseAddr("127.0.0.1"), 18082, 0, 6, 0},
		{"be", "sluice-0000-0000-0000-0000-0000-0000-0000-0001-18081", netip.MustParseAddr("::1"), 18081, 0, 6, 0},
		{"be", "sluice-127-0-0-2-18081", netip.MustParseAddr("127.0.0.2"), 18081, 0, 4, 0},
		{"be", "other", netip.MustParseAddr("127.0.0.3"), 18081, 0, 4, 0},
	}
	if !slices.Equal(rows, want) {
		t.Fatalf("rows:\n got %+v\nwant %+v", rows, want)
	}
}

func TestParseShowStatGolden(t *testing.T) {
	b, err := os.ReadFile("testdata/show-stat.txt")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parseShowStat(string(b))
	if err != nil {
		t.Fatal(err)
	}
	want := []statRow{
		{"be", "static1", "MAINT", "", "", "", 0},
		{"be", "sluice-127-0-0-1-18081", "DRAIN", "L7OK", "200", "Layer7 check passed", 2},
		{"be", "sluice-127-0-0-1-18082", "DOWN", "L7STS", "503", "Layer7 wrong status", 0},
		{"be", "sluice-0000-0000-0000-0000-0000-0000-0000-0001-18081", "DOWN", "L4CON", "", "Layer4 connection problem", 0},
		{"be", "sluice-127-0-0-2-18081", "DOWN", "L4CON", "", "Layer4 connection problem", 0},
		{"be", "other", "DOWN", "L4CON", "", "Layer4 connection problem", 0},
	}
	if !slices.Equal(rows, want) {
		t.Fatalf("rows:\n got %+v\nwant %+v", rows, want)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want error
	}{
		{"Can't find backend.\n\n", lb.ErrGroupNotFound},
		{"No such proxy.\n\n", lb.ErrGroupNotFound},
		{"Permission denied\n\n", nil},
		{"", nil},
		{"1\n", nil},
		{"1\n# be_name srv_name\n", nil},
		{"1\n# be_name srv_name srv_addr srv_admin_state srv_port\nbe x 10.0.0.1 0\n", nil},
		{"1\n# be_name srv_name srv_addr srv_admin_state srv_port\nbe x 10.0.0.1 0 99999\n", nil},
		{"2\n# be_name srv_name srv_addr srv_admin_state srv_port\n", nil},
	} {
		_, err := parseServersState(tc.out)
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("parseServersState(%q) = %v, want error %v", tc.out, err, tc.want)
		}
	}
	for _, tc := range []struct {
		out  string
		want error
	}{
		{"No such proxy.\n\n", lb.ErrGroupNotFound},
		{"Unknown command\n", nil},
		{"# pxname,svname\n", nil},
		{"# pxname,svname,status,\nbe,x,UP\n", nil},
		{"# pxname,svname,status,\nbe,\"x,UP,\n", nil},
	} {
		_, err := parseShowStat(tc.out)
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("parseShowStat(%q) = %v, want error %v", tc.out, err, tc.want)
		}
	}
	// A quoted field with a comma (HAProxy quotes such text) is one field.
	rows, err := parseShowStat("# pxname,svname,status,check_desc,\nbe,x,DOWN,\"a, b\",\n")
	if err != nil || len(rows) != 1 || rows[0].CheckDesc != "a, b" {
		t.Fatalf("quoted: %+v %v", rows, err)
	}
}

func TestHealth(t *testing.T) {
	for _, tc := range []struct {
		admin  int
		st     *statRow
		state  lb.State
		reason string
	}{
		{admForcedMaint, &statRow{Status: "MAINT"}, lb.Draining, "maint"},
		{admForcedDrain, &statRow{Status: "DRAIN", CheckStatus: "L7OK"}, lb.Draining, "drain"},
		{0, nil, lb.Unavailable, "not in stats"},
		{0, &statRow{Status: "UP 1/2", CheckStatus: "INI"}, lb.Initial, ""},
		{0, &statRow{Status: "DOWN", CheckStatus: "INI"}, lb.Initial, ""},
		{0, &statRow{Status: "UP", CheckStatus: "L7OK", CheckCode: "200"}, lb.Healthy, ""},
		{0, &statRow{Status: "UP 1/2", CheckStatus: "L7STS", CheckCode: "503", CheckDesc: "Layer7 wrong status"}, lb.Healthy, "L7STS 503: Layer7 wrong status"},
		{0, &statRow{Status: "DOWN", CheckStatus: "L4CON", CheckDesc: "Layer4 connection problem"}, lb.Unhealthy, "L4CON: Layer4 connection problem"},
		{0, &statRow{Status: "DOWN 1/1", CheckStatus: "L7OK"}, lb.Unhealthy, "L7OK"},
		{0, &statRow{Status: "NOLB", CheckStatus: "L7OKC", CheckCode: "404"}, lb.Draining, "nolb"},
		{0, &statRow{Status: "no check"}, lb.Unavailable, "no check"},
		{0, &statRow{Status: "weird", CheckStatus: "L7OK"}, lb.Unavailable, "weird"},
	} {
		state, reason := health(tc.admin, tc.st)
		if state != tc.state || reason != tc.reason {
			t.Errorf("health(%d, %+v) = %s %q, want %s %q", tc.admin, tc.st, state, reason, tc.state, tc.reason)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		out  string
		ok   []string
		want error // nil: success; errAny: some error
	}{
		{"\n", nil, nil},
		{"New server registered.\n\n", []string{msgNewServer}, nil},
		{"\n\n\n", nil, nil},
		{"Backend must use a dynamic load balancing to support dynamic servers.\n\n", nil, lb.ErrNotDynamic},
		{"No such backend.\n\n", nil, lb.ErrGroupNotFound},
		{"No such server.\n\nNo such server.\n\n", nil, errServerGone},
		{msgHasConnections + "\n\n", []string{msgServerDeleted}, errBusy},
		{"Only servers in maintenance mode can be deleted.\n", nil, errAny},
		{"Permission denied\n\n", nil, errAny},
		{"\nUnknown command\n", nil, errAny},
	} {
		err := classify(tc.out, tc.ok...)
		switch {
		case tc.want == nil && err != nil, tc.want != nil && err == nil:
			t.Errorf("classify(%q) = %v, want %v", tc.out, err, tc.want)
		case tc.want != nil && tc.want != errAny && !errors.Is(err, tc.want):
			t.Errorf("classify(%q) = %v, want %v", tc.out, err, tc.want)
		}
	}
}

var errAny = errors.New("any error")

func FuzzParseServersState(f *testing.F) {
	if b, err := os.ReadFile("testdata/show-servers-state.txt"); err == nil {
		f.Add(string(b))
	}
	f.Add("1\n# be_name srv_name srv_addr srv_admin_state srv_port\nbe x ::1 8 80\n")
	f.Add("Can't find backend.\n")
	f.Fuzz(func(t *testing.T, out string) {
		rows, err := parseServersState(out)
		if err != nil && rows != nil {
			t.Fatal("rows with error")
		}
		for _, r := range rows {
			if strings.ContainsAny(r.Name, " \n") || r.Addr.Zone() != "" && r.Addr.Is4() {
				t.Fatalf("bad row %+v", r)
			}
		}
	})
}

func FuzzParseShowStat(f *testing.F) {
	if b, err := os.ReadFile("testdata/show-stat.txt"); err == nil {
		f.Add(string(b))
	}
	f.Add("# pxname,svname,status,check_desc,\nbe,x,DOWN,\"a, b\",\n")
	f.Add("No such proxy.\n")
	f.Fuzz(func(t *testing.T, out string) {
		rows, err := parseShowStat(out)
		if err != nil && rows != nil {
			t.Fatal("rows with error")
		}
		for _, r := range rows {
			if r.Sessions < -1 {
				t.Fatalf("sessions %d", r.Sessions)
			}
			health(0, &r) // must not panic
		}
	})
}

func FuzzClassify(f *testing.F) {
	f.Add("New server registered.\n\n")
	f.Add(msgNotDynamic + "\n")
	f.Fuzz(func(t *testing.T, out string) {
		_ = classify(out, msgNewServer)
	})
}

// FuzzCommandInput checks that no backend name or address that passes
// validation can smuggle a second command or line into a command.
func FuzzCommandInput(f *testing.F) {
	f.Add("be", "10.0.0.1:80")
	f.Add("be;shutdown", "[::1]:80")
	f.Add("be\n", "1.2.3.4:5")
	f.Fuzz(func(t *testing.T, backend, addr string) {
		if validBackend(backend) != nil {
			return
		}
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return
		}
		ap, err = checkAddr(ap)
		if err != nil {
			return
		}
		cmd := "add server " + backend + "/" + serverName("sluice-", ap) + " " + formatAddr(ap)
		if err := checkCommand(cmd); err != nil {
			t.Fatalf("validated input makes a bad command %q: %v", cmd, err)
		}
		if strings.Count(cmd, " ") != 3 {
			t.Fatalf("validated input adds arguments: %q", cmd)
		}
	})
}

func BenchmarkParseShowStat(b *testing.B) {
	data, err := os.ReadFile("testdata/show-stat.txt")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := parseShowStat(string(data)); err != nil {
			b.Fatal(err)
		}
	}
}
