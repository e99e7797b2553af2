//go:build integration

package integration

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// process is one child process of a test. It is killed by PID in t.Cleanup
// if it is still running when the test ends, whatever the outcome.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	state   *os.ProcessState
	endedAt time.Time // when the process was seen to exit; valid after done
}

// logDir is where a test's process logs go: SLUICE_TEST_LOGS/<test name>
// when that variable is set (kept after the run), otherwise a temp dir that
// outlives the processes (t.TempDir's removal runs after their cleanups).
func logDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "logs")
	if keep := os.Getenv("SLUICE_TEST_LOGS"); keep != "" {
		d = filepath.Join(keep, t.Name())
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatalf("creating log dir: %v", err)
	}
	return d
}

// start runs path with args, stdout and stderr going to dir/name.log.
func start(t *testing.T, dir, name, path string, args ...string) *process {
	t.Helper()
	p := &process{name: name, logPath: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.logPath)
	if err != nil {
		t.Fatalf("creating log for %s: %v", name, err)
	}
	p.cmd = exec.Command(path, args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	// A proxy that finds POD_NAME would watch a Pod through an API server.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "POD_NAME=") && !strings.HasPrefix(kv, "POD_NAMESPACE=") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	if err := p.cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.cmd.Wait()
		p.endedAt = time.Now()
		p.state = p.cmd.ProcessState
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			p.cmd.Process.Kill() // SIGKILL by PID
			<-p.done
		}
		if t.Failed() {
			t.Logf("--- last lines of %s (pid %d, %s) ---\n%s", name, p.cmd.Process.Pid, p.state, tail(p.logPath, 40))
		}
	})
	return p
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("sending %v to %s (pid %d): %v", sig, p.name, p.pid(), err)
	}
}

// wait waits up to timeout for the process to exit and returns its exit
// code, or -1 if it is still running (or died of a signal).
func (p *process) wait(timeout time.Duration) int {
	select {
	case <-p.done:
		return p.state.ExitCode()
	case <-time.After(timeout):
		return -1
	}
}

func tail(path string, n int) string {
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

// freePort returns a port that was free on ip a moment ago.
func freePort(t *testing.T, ip string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("finding a free port on %s: %v", ip, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// freePortOn returns a port that was free on every address in ips a moment
// ago, so backends on distinct loopback addresses can share one
// EndpointSlice port.
func freePortOn(t *testing.T, ips []string) int {
	t.Helper()
	for range 50 {
		port := freePort(t, ips[0])
		ok := true
		for _, ip := range ips[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(port)))
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
	t.Fatalf("no port free on all of %v", ips)
	return 0
}

// waitHTTP polls url until it answers status want, or fails the test.
func waitHTTP(t *testing.T, url string, want int, timeout time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
			err = errors.New(resp.Status)
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("waiting for %s to answer %d: %v", url, want, last)
}

// report prints a test's one-line summary both to the test log and to
// stdout, so it shows without -v too.
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	fmt.Println(line)
}
