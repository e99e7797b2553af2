package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procSpec says how to start one process.
type procSpec struct {
	name    string   // for logs and the pid file
	path    string   // binary
	args    []string // without argv[0]
	env     []string // nil: the environment of this process
	dir     string   // working directory; empty: the current one
	logPath string   // stdout and stderr are appended here
	pidDir  string   // a pid file is written here so a later run can kill leftovers
	// stamp: each line of output is stamped with the time it was read
	// (logfile.go), as a container runtime does; when the process exits,
	// what is left of its process group is killed, as a container's is.
	stamp bool
}

// outputDrain bounds how long a stamped process's exit waits for its
// output pipe to close (a child that left its process group may hold it).
const outputDrain = 2 * time.Second

// process is one running child. Wait is called by a goroutine started with
// it; done is closed once the child has exited and been reaped.
type process struct {
	name    string
	pid     int
	start   uint64 // start time in clock ticks since boot, from /proc/PID/stat
	cmd     *exec.Cmd
	done    chan struct{}
	state   *os.ProcessState // valid after done
	err     error            // valid after done
	pidFile string
}

// startProcess starts spec in its own process group. The child gets SIGKILL
// if this process dies first (Pdeathsig), and its pid file lets the next
// run kill it should that fail.
func startProcess(spec procSpec) (*process, error) {
	logf, err := os.OpenFile(spec.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log of %s: %w", spec.name, err)
	}
	fmt.Fprintf(logf, "==== %s starting %s %s\n", time.Now().Format(time.RFC3339Nano), spec.path, strings.Join(spec.args, " "))
	cmd := exec.Command(spec.path, spec.args...)
	cmd.Env = spec.env
	cmd.Dir = spec.dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	var out, outW *os.File // the read and write ends of the stamped output
	if spec.stamp {
		if out, outW, err = os.Pipe(); err != nil {
			logf.Close()
			return nil, fmt.Errorf("opening the output pipe of %s: %w", spec.name, err)
		}
		cmd.Stdout, cmd.Stderr = outW, outW
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	if outW != nil {
		outW.Close() // the child holds its own copy
	}
	if err != nil {
		logf.Close()
		if out != nil {
			out.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", spec.name, err)
	}
	copied := make(chan struct{})
	if out != nil {
		go func() {
			defer close(copied)
			_ = stampLines(out, logf, time.Now)
			out.Close()
			logf.Close()
		}()
	} else {
		logf.Close() // the child holds its own copy
		close(copied)
	}
	p := &process{name: spec.name, pid: cmd.Process.Pid, cmd: cmd, done: make(chan struct{})}
	p.start, _ = procStartTime(p.pid)
	if spec.pidDir != "" {
		p.pidFile = filepath.Join(spec.pidDir, fmt.Sprintf("%s.%d.pid", sanitize(spec.name), p.pid))
		_ = os.WriteFile(p.pidFile, fmt.Appendf(nil, "%d %d\n", p.pid, p.start), 0o644)
	}
	go func() {
		p.err = cmd.Wait()
		p.state = cmd.ProcessState
		if out != nil {
			// The group's leftovers die with the container and close
			// the pipe; done waits until what they wrote is in the
			// file, so that a follower that saw done reads it all. One
			// that left the group is not waited for beyond outputDrain.
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
			select {
			case <-copied:
			case <-time.After(outputDrain):
				out.Close()
				<-copied
			}
		}
		if p.pidFile != "" {
			_ = os.Remove(p.pidFile)
		}
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process itself (not its group), as a container
// runtime signals a container's first process.
func (p *process) signal(sig syscall.Signal) {
	if !p.exited() {
		_ = syscall.Kill(p.pid, sig)
	}
}

// kill sends SIGKILL to the whole process group, so helpers the process
// started die with it.
func (p *process) kill() {
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	_ = syscall.Kill(p.pid, syscall.SIGKILL)
}

// stop sends SIGTERM, waits up to grace, then SIGKILL, and waits for the exit.
func (p *process) stop(grace time.Duration) {
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	p.kill()
	<-p.done
	// The group may hold children that outlived the leader.
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
}

// exitCode returns the exit code as a container runtime reports it: 128+N
// for death by signal N.
func (p *process) exitCode() int32 {
	if p.state == nil {
		return 128 + int32(syscall.SIGKILL)
	}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int32(ws.Signal())
	}
	return int32(p.state.ExitCode())
}

// procStartTime reads a process's start time (field 22 of /proc/PID/stat),
// which together with the PID identifies it even after PID reuse.
func procStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may contain spaces; fields after it follow
	// the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, errors.New("short stat")
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0, errors.New("zombie")
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// alive reports whether the process identified by pid and start time still
// runs (a zombie counts as gone).
func alive(pid int, start uint64) bool {
	st, err := procStartTime(pid)
	return err == nil && st == start
}

// killRecorded kills every process recorded by a pid file in dir that still
// runs, and removes the files. It returns how many it killed.
func killRecorded(dir string) int {
	files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
	killed := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		_ = os.Remove(f)
		if err != nil {
			continue
		}
		var pid int
		var start uint64
		if _, err := fmt.Sscanf(string(b), "%d %d", &pid, &start); err != nil || pid <= 1 {
			continue
		}
		if !alive(pid, start) {
			continue
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		killed++
		for i := 0; i < 50 && alive(pid, start); i++ {
			time.Sleep(100 * time.Millisecond)
		}
	}
	return killed
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
}
