// Package testenv holds what the slow tests share to run real parts on this
// machine: free ports on loopback, child processes that are stopped by PID
// when the test ends whatever its outcome, and HAProxy in the foreground
// with its runtime API socket; and slow and hostile HTTP clients for the
// tests of the proxy's client limits (attackers.go). Integration and e2e
// suites, the HAProxy provider's integration tests and the BIND and
// cluster harnesses use it; nothing outside tests does.
package testenv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Port returns a TCP port that was free on host a moment ago. It picks
// below the kernel's ephemeral range (ip_local_port_range), where no
// outgoing connection takes a port between the check and the test's bind:
// on this shared machine, other load tests open thousands of connections
// to loopback, and a port the kernel handed out as free (port 0) was
// often some client's source port a moment later ("address already in
// use"). It falls back to the kernel's choice when 100 picks found none
// (the range below is used up).
//
// A port is handed out at most once per test process: it is free only
// until its test binds it, so two random picks of the same port (a test
// asks for a dozen; a package for hundreds) would both pass the check and
// the second bind would fail. That happened in a make test run.
func Port(host string) (int, error) {
	low := ephemeralLow()
	for range 100 {
		port := minPort + rand.IntN(low-minPort)
		if !given.take(port) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			l.Close()
			return port, nil
		}
	}
	// The kernel's choice, also handed out at most once: the range below
	// may be used up in a long test process.
	for range 100 {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return 0, fmt.Errorf("finding a free port on %s: %w", host, err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if given.take(port) {
			return port, nil
		}
	}
	return 0, fmt.Errorf("finding a free port on %s: every one the kernel chose was handed out before", host)
}

// handedOut is the set of ports Port returned (or tried) in this process.
type handedOut struct {
	mu    sync.Mutex
	ports map[int]bool
}

// take marks port as handed out; false if it was already.
func (h *handedOut) take(port int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ports[port] {
		return false
	}
	if h.ports == nil {
		h.ports = map[int]bool{}
	}
	h.ports[port] = true
	return true
}

// given is the one per process: every test of a package shares the ports.
var given handedOut

// minPort is the lowest port Port picks: above the well-known services.
const minPort = 20000

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > minPort+1000 {
				return n
			}
		}
	}
	return 32768
}

// FreePort is Port failing the test on error.
func FreePort(t testing.TB, host string) int {
	t.Helper()
	p, err := Port(host)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// FreeAddr returns "host:port" with a port that was free a moment ago.
func FreeAddr(t testing.TB, host string) string {
	t.Helper()
	return net.JoinHostPort(host, fmt.Sprint(FreePort(t, host)))
}

// FreePortOnAll returns a port that was free on every address in hosts a
// moment ago, so that servers on distinct loopback addresses can share one
// port number.
func FreePortOnAll(t testing.TB, hosts []string) int {
	t.Helper()
	for range 50 {
		port := FreePort(t, hosts[0])
		ok := true
		for _, h := range hosts[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(h, fmt.Sprint(port)))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return port
		}
	}
	t.Fatalf("no port free on all of %v", hosts)
	return 0
}

// Spec says how to run a child process.
type Spec struct {
	// Name names the process in messages and its log, LogDir/Name.log.
	Name string
	// Path and Args are the program and its arguments.
	Path string
	Args []string
	// LogDir receives the log of stdout and stderr; "" means t.TempDir().
	LogDir string
	// Env is the environment; nil means this process's.
	Env []string
	// StopGrace is how long the process has after SIGTERM, at the end of
	// the test, before SIGKILL; 0 sends SIGKILL at once.
	StopGrace time.Duration
}

// Process is a child process of a test. It is stopped by its PID in
// t.Cleanup if it still runs when the test ends, whatever the outcome;
// the end of its log is printed if the test failed.
type Process struct {
	Name    string
	Cmd     *exec.Cmd
	LogPath string
	done    chan struct{} // closed when the process has exited
	state   *os.ProcessState
	endedAt time.Time
}

// Start runs spec's program.
func Start(t testing.TB, spec Spec) *Process {
	t.Helper()
	dir := spec.LogDir
	if dir == "" {
		dir = t.TempDir()
	}
	p := &Process{Name: spec.Name, LogPath: filepath.Join(dir, spec.Name+".log"), done: make(chan struct{})}
	f, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("creating log for %s: %v", spec.Name, err)
	}
	p.Cmd = exec.Command(spec.Path, spec.Args...)
	p.Cmd.Stdout, p.Cmd.Stderr = f, f
	p.Cmd.Env = spec.Env
	if err := p.Cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("starting %s: %v", spec.Name, err)
	}
	go func() {
		p.Cmd.Wait()
		p.endedAt = time.Now()
		p.state = p.Cmd.ProcessState
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop(spec.StopGrace)
		if t.Failed() {
			t.Logf("--- last lines of %s (pid %d, %s) ---\n%s", spec.Name, p.Pid(), p.state, Tail(p.LogPath, 40))
		}
	})
	return p
}

// Pid is the process's ID.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// EndedAt is when the process was seen to exit; valid once Done.
func (p *Process) EndedAt() time.Time { <-p.done; return p.endedAt }

// Signal sends sig to the process, failing the test if it cannot.
func (p *Process) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("sending %v to %s (pid %d): %v", sig, p.Name, p.Pid(), err)
	}
}

// Wait waits up to timeout for the process to exit and returns its exit
// code, or -1 if it is still running (or died of a signal).
func (p *Process) Wait(timeout time.Duration) int {
	select {
	case <-p.done:
		return p.state.ExitCode()
	case <-time.After(timeout):
		return -1
	}
}

// Stop ends the process by its PID and waits for it: SIGTERM, then
// SIGKILL after grace (at once for a grace of 0). A process already gone
// is left alone.
func (p *Process) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	if grace > 0 {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
	}
	_ = p.Cmd.Process.Kill()
	<-p.done
}

// Tail returns the last n lines of the file at path.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// HAProxyBin is the haproxy binary: $SLUICE_HAPROXY if set, else the one
// on PATH, else Debian's.
func HAProxyBin() (string, error) {
	p := os.Getenv("SLUICE_HAPROXY")
	if p == "" {
		p = "/usr/sbin/haproxy"
		if lp, err := exec.LookPath("haproxy"); err == nil {
			p = lp
		}
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("haproxy not found (%w): run scripts/install-deps.sh", err)
	}
	return p, nil
}

// HAProxy says how to run HAProxy.
type HAProxy struct {
	// Config is the configuration file to run.
	Config string
	// Args are more arguments after "-db -f Config" ("-W -S master.sock").
	Args []string
	// Socket, if set, is a unix socket (the runtime API) that Start waits
	// for (removing a stale one first).
	Socket string
	// LogDir and Name are as in Spec; Name defaults to "haproxy".
	LogDir, Name string
	// StopGrace is as in Spec; 0 means 5 s (HAProxy stops at once on
	// SIGTERM).
	StopGrace time.Duration
}

// StartHAProxy runs HAProxy in the foreground ("-db", so the test owns its
// PID) and waits up to 15 s for its runtime API socket.
func StartHAProxy(t testing.TB, h HAProxy) *Process {
	t.Helper()
	bin, err := HAProxyBin()
	if err != nil {
		t.Fatal(err)
	}
	if h.Name == "" {
		h.Name = "haproxy"
	}
	if h.StopGrace == 0 {
		h.StopGrace = 5 * time.Second
	}
	if h.Socket != "" {
		os.Remove(h.Socket)
	}
	p := Start(t, Spec{Name: h.Name, Path: bin, Args: append([]string{"-db", "-f", h.Config}, h.Args...),
		LogDir: h.LogDir, StopGrace: h.StopGrace})
	if h.Socket == "" {
		return p
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.Dial("unix", h.Socket)
		if err == nil {
			c.Close()
			return p
		}
		if p.Exited() {
			t.Fatalf("haproxy exited before its socket %s answered:\n%s", h.Socket, Tail(p.LogPath, 20))
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy socket %s: %v", h.Socket, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
