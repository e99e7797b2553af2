package server

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// listenTCP binds addr; with reusePort the socket gets SO_REUSEPORT before
// bind, so several processes (per-node replicas on the host network) can
// listen on one address and the kernel spreads new connections over them.
// Every socket of such a group must set the option, and all must belong to
// the same user.
func listenTCP(addr string, reusePort bool) (net.Listener, error) {
	var lc net.ListenConfig
	if reusePort {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			}); err != nil {
				return err
			}
			if serr != nil {
				return fmt.Errorf("setting SO_REUSEPORT: %w", serr)
			}
			return nil
		}
	}
	return lc.Listen(context.Background(), "tcp", addr)
}
