//go:build linux

package http1

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

const parkSupported = true

// poller is the epoll instance of a Server's parked connections; epfd is
// valid while parking.running (guarded by Server.mu), and the poller
// goroutine stops, closing it, only when the server has no connection.
type poller struct {
	epfd int
}

// startPoller starts the poller goroutine if it does not run (s.mu held).
func (s *Server) startPoller() {
	p := &s.park
	if p.running || s.o.parkTick < 0 {
		return
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		// Idle connections then keep their goroutine.
		s.log.Warn("http1: creating the epoll instance for idle connections", "error", err)
		return
	}
	p.epfd, p.running = epfd, true
	go s.poll(epfd)
}

// poll waits for parked connections to become readable, starts their new
// loops, and sweeps every parkTick, until the server has no connection.
func (s *Server) poll(epfd int) {
	tick := s.o.parkTick
	events := make([]unix.EpollEvent, 256)
	var ready []*conn
	last := time.Now()
	for {
		n, err := unix.EpollWait(epfd, events, int(max(tick/time.Millisecond, 1)))
		if err != nil && !errors.Is(err, unix.EINTR) {
			s.log.Error("http1: waiting for parked connections", "error", err)
			n = 0
			time.Sleep(tick) // not a busy loop; the sweep still runs
		}
		s.mu.Lock()
		for i := range max(n, 0) {
			if c := s.ready(eventToken(&events[i])); c != nil {
				ready = append(ready, c)
			}
		}
		if now := time.Now(); now.Sub(last) >= tick {
			last = now
			s.sweep(now)
		}
		stop := len(s.conns) == 0
		if stop {
			s.park.running = false
			unix.Close(epfd)
		}
		s.mu.Unlock()
		for i, c := range ready {
			go c.resume()
			ready[i] = nil
		}
		ready = ready[:0]
		if stop {
			return
		}
	}
}

// register adds c, whose token is set, to the poller: one-shot, for
// bytes, the client's close, or an error (s.mu held).
func (p *parking) register(c *conn) error {
	var err error
	cerr := c.raw.Control(func(fd uintptr) {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT}
		setEventToken(&ev, c.token)
		err = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	})
	return errors.Join(cerr, err)
}

// deregister removes c from the poller (nothing if its descriptor is
// closed: the kernel removed it then).
func (p *parking) deregister(c *conn) {
	c.raw.Control(func(fd uintptr) {
		unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
	})
}

// The token fills the event's 64-bit data word, which x/sys/unix splits
// into Fd and Pad.
func setEventToken(ev *unix.EpollEvent, token uint64) {
	ev.Fd, ev.Pad = int32(uint32(token)), int32(uint32(token>>32))
}

func eventToken(ev *unix.EpollEvent) uint64 {
	return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
}
