package haproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"sluice.dev/sluice/internal/lb"
)

// client speaks HAProxy's runtime API in its simplest mode: one connection
// per command line, which HAProxy answers and then closes. No session state
// survives between calls, so a reload or restart of HAProxy costs nothing
// but the failed call in flight.
type client struct {
	network, address string
	timeout          time.Duration
	maxResponse      int64
}

// run sends one command line and returns the full response. Several
// commands go on one line (HAProxy runs them in order, without letting other
// CLI clients interleave) when they must follow each other closely.
func (c *client) run(ctx context.Context, cmds ...string) (string, error) {
	for _, cmd := range cmds {
		if err := checkCommand(cmd); err != nil {
			return "", err
		}
	}
	line := strings.Join(cmds, "; ")
	d := net.Dialer{Timeout: c.timeout}
	conn, err := d.DialContext(ctx, c.network, c.address)
	if err != nil {
		return "", fmt.Errorf("dialing runtime API %s: %w: %w", c.address, lb.ErrUnreachable, err)
	}
	defer conn.Close()
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	if _, err := io.WriteString(conn, line+"\n"); err != nil {
		return "", fmt.Errorf("sending %q: %w: %w", verb(line), lb.ErrUnreachable, err)
	}
	// HAProxy closes the connection after answering a non-interactive
	// command; read to EOF, refusing absurdly large answers.
	b, err := io.ReadAll(io.LimitReader(conn, c.maxResponse+1))
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		return "", fmt.Errorf("reading answer to %q: %w: %w", verb(line), lb.ErrUnreachable, err)
	}
	if int64(len(b)) > c.maxResponse {
		return "", fmt.Errorf("reading answer to %q: longer than %d bytes", verb(line), c.maxResponse)
	}
	return string(b), nil
}

// checkCommand is the last gate before bytes reach HAProxy: a command must
// be printable ASCII without the command separator ';', a line break or a
// backslash (HAProxy's escape character). Arguments are validated where they
// are formatted (validBackend, serverName, checked options); this catches
// anything that slipped past.
func checkCommand(cmd string) error {
	if cmd == "" {
		return fmt.Errorf("empty command: %w", lb.ErrInvalid)
	}
	for i := 0; i < len(cmd); i++ {
		ch := cmd[i]
		if ch < 0x20 || ch > 0x7e || ch == ';' || ch == '\\' {
			return fmt.Errorf("command contains byte %#x: %w", ch, lb.ErrInvalid)
		}
	}
	return nil
}

// verb names a command for error messages without echoing its arguments.
func verb(line string) string {
	f := strings.Fields(line)
	if len(f) > 2 {
		f = f[:2]
	}
	return strings.Join(f, " ")
}

// Answers HAProxy 2.6 gives, verified against a running instance.
const (
	msgNoBackend       = "No such backend."
	msgCantFindBackend = "Can't find backend."
	msgNoProxy         = "No such proxy."
	msgNoServer        = "No such server."
	msgNotDynamic      = "Backend must use a dynamic load balancing to support dynamic servers."
	msgHasConnections  = "Server still has connections attached to it, cannot remove it."
	msgNewServer       = "New server registered."
	msgServerDeleted   = "Server deleted."
	msgExists          = "Already exists a server with the same name in backend."
)

// errServerGone marks an answer saying the server does not exist.
var errServerGone = errors.New("no such server")

// errBusy marks "del server" refused because connections remain.
var errBusy = errors.New("server still has connections")

// classify turns a command's answer into nil (success) or an error wrapping
// a sentinel. ok lists the answers that mean success besides empty output.
func classify(answer string, ok ...string) error {
	text := strings.TrimSpace(answer)
	if text == "" {
		return nil
	}
	for _, o := range ok {
		if text == o {
			return nil
		}
	}
	// A joined command line answers once per command; any line that is not
	// a success message decides.
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || contains(ok, l):
			continue
		case l == msgNoBackend || l == msgCantFindBackend || l == msgNoProxy:
			return fmt.Errorf("%s: %w", l, lb.ErrGroupNotFound)
		case strings.HasPrefix(l, msgNotDynamic[:len(msgNotDynamic)-1]):
			return fmt.Errorf("%s: %w", l, lb.ErrNotDynamic)
		case l == msgNoServer:
			return errServerGone
		case l == msgHasConnections:
			return errBusy
		default:
			return fmt.Errorf("haproxy answered %q", truncate(l, 200))
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
