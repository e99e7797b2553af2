package haproxy

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeAPI is a small model of HAProxy 2.6's runtime API, enough to unit-test
// the provider's command sequences. Answers are copied from a real HAProxy;
// the integration tests check the real thing.
type fakeAPI struct {
	path string

	mu       sync.Mutex
	backends map[string]*fakeBackend
	log      []string // every command line received
	pid      int      // "show info" Pid; a new value models a reload
	// old is the process a takeover replaced, still accepting on the
	// socket: it answers every other connection while oldTurns > 0.
	old      *fakeProcess
	oldTurns int
	conns    int
}

// fakeProcess is what a process answers from: its pid and backends.
type fakeProcess struct {
	pid      int
	backends map[string]*fakeBackend
}

type fakeBackend struct {
	dynamic bool
	servers []*fakeServer
}

type fakeServer struct {
	name      string
	addr      netip.AddrPort
	checkPort int // "port N" of add server; 0 none
	admin     int
	status    string // show stat status
	check     string // check_status
	code      string
	scur      int
	since     int // srv_time_since_last_change
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	f := &fakeAPI{path: filepath.Join(t.TempDir(), "admin.sock"), backends: map[string]*fakeBackend{}, pid: 100}
	ln, err := net.Listen("unix", f.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

func (f *fakeAPI) serve(c net.Conn) {
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return
	}
	line = strings.TrimSuffix(line, "\n")
	f.mu.Lock()
	f.log = append(f.log, line)
	f.conns++
	if f.old != nil && f.oldTurns > 0 && f.conns%2 == 0 {
		f.oldTurns--
		// Answer from the old process.
		f.pid, f.old.pid = f.old.pid, f.pid
		f.backends, f.old.backends = f.old.backends, f.backends
		defer func() {
			f.mu.Lock()
			f.pid, f.old.pid = f.old.pid, f.pid
			f.backends, f.old.backends = f.old.backends, f.backends
			f.mu.Unlock()
		}()
	}
	var out strings.Builder
	for _, cmd := range strings.Split(line, ";") {
		out.WriteString(f.exec(strings.Fields(cmd)))
	}
	f.mu.Unlock()
	c.Write([]byte(out.String()))
}

func (f *fakeAPI) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

func (f *fakeAPI) server(backend, name string) *fakeServer {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b := f.backends[backend]; b != nil {
		for _, s := range b.servers {
			if s.name == name {
				return s
			}
		}
	}
	return nil
}

func (f *fakeAPI) update(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

func (f *fakeAPI) lookup(ref string) (*fakeBackend, int, string) {
	bn, sn, _ := strings.Cut(ref, "/")
	b := f.backends[bn]
	if b == nil {
		return nil, -1, "No such backend.\n"
	}
	for i, s := range b.servers {
		if s.name == sn {
			return b, i, ""
		}
	}
	return b, -1, "No such server.\n"
}

func (f *fakeAPI) exec(w []string) string {
	switch {
	case len(w) == 2 && w[0] == "show" && w[1] == "info":
		return fmt.Sprintf("Name: HAProxy\nVersion: 2.6.12\nPid: %d\nUptime_sec: 3\nStart_time_sec: %d\n\n", f.pid, 1700000000+f.pid)
	case len(w) == 4 && w[0] == "show" && w[1] == "servers" && w[2] == "state":
		b := f.backends[w[3]]
		if b == nil {
			return "Can't find backend.\n\n"
		}
		var s strings.Builder
		s.WriteString("1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl srv_check_port srv_check_addr srv_agent_addr srv_agent_port\n")
		for i, sv := range b.servers {
			fmt.Fprintf(&s, "3 %s %d %s %s 2 %d 100 100 %d 15 3 2 6 0 0 0 - %d - 0 %d - - 0\n",
				w[3], i+1, sv.name, sv.addr.Addr(), sv.admin, sv.since, sv.addr.Port(), sv.checkPort)
		}
		return s.String() + "\n"
	case len(w) == 5 && w[0] == "show" && w[1] == "stat":
		b := f.backends[w[2]]
		if b == nil {
			return "No such proxy.\n\n"
		}
		var s strings.Builder
		s.WriteString("# pxname,svname,scur,status,check_status,check_code,check_desc,type,\n")
		for _, sv := range b.servers {
			status := sv.status
			switch {
			case sv.admin&admMaint != 0:
				status = "MAINT"
			case sv.admin&admDrain != 0:
				status = "DRAIN"
			}
			fmt.Fprintf(&s, "%s,%s,%d,%s,%s,%s,,2,\n", w[2], sv.name, sv.scur, status, sv.check, sv.code)
		}
		return s.String() + "\n"
	case len(w) >= 4 && w[0] == "add" && w[1] == "server":
		bn, sn, _ := strings.Cut(w[2], "/")
		b := f.backends[bn]
		if b == nil {
			return "No such backend.\n\n"
		}
		if !b.dynamic {
			return "Backend must use a dynamic load balancing to support dynamic servers.\n\n"
		}
		ap, err := netip.ParseAddrPort(w[3])
		if err != nil {
			return "invalid address\n\n"
		}
		for _, s := range b.servers {
			if s.name == sn {
				return "Already exists a server with the same name in backend.\n\n"
			}
		}
		sv := &fakeServer{name: sn, addr: ap, admin: admForcedMaint, status: "MAINT"}
		for i := 4; i+1 < len(w); i++ {
			if w[i] == "port" {
				sv.checkPort, _ = strconv.Atoi(w[i+1])
			}
		}
		b.servers = append(b.servers, sv)
		return "New server registered.\n\n"
	case len(w) == 3 && w[0] == "enable" && w[1] == "health":
		_, _, msg := f.lookup(w[2])
		return msg + "\n"
	case len(w) == 5 && w[0] == "set" && w[1] == "server":
		b, i, msg := f.lookup(w[2])
		if msg != "" {
			return msg + "\n"
		}
		sv := b.servers[i]
		switch w[3] + " " + w[4] {
		case "state ready":
			sv.admin = 0
			sv.status, sv.check = "UP 1/2", "INI"
		case "state drain":
			sv.admin, sv.since = admForcedDrain, 0 // an admin change resets it, as in HAProxy
		case "state maint":
			sv.admin, sv.since = admForcedMaint, 0
		case "health down":
			sv.status = "DOWN"
		}
		return "\n"
	case len(w) == 4 && w[0] == "set" && w[1] == "weight":
		_, _, msg := f.lookup(w[2])
		return msg + "\n"
	case len(w) == 3 && w[0] == "del" && w[1] == "server":
		b, i, msg := f.lookup(w[2])
		switch {
		case msg != "":
			return msg + "\n"
		case b.servers[i].admin&admMaint == 0:
			return "Only servers in maintenance mode can be deleted.\n\n"
		case b.servers[i].scur > 0:
			return "Server still has connections attached to it, cannot remove it.\n\n"
		}
		b.servers = append(b.servers[:i], b.servers[i+1:]...)
		return "Server deleted.\n\n"
	}
	return "Unknown command.\n\n"
}
