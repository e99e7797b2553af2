//go:build linux

package http1

import (
	"errors"
	"os"
	"syscall"
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
//
// The poller does not block in epoll_wait: a goroutine in a blocking
// system call keeps the only P (GOMAXPROCS=1) until sysmon takes it back,
// up to 10 ms later, stalling every connection meanwhile (a version that
// blocked cost 0.19 µs per request more in make bench-quick; this one
// nothing measurable).
// The epoll descriptor is itself pollable, so the runtime's netpoller
// waits for it (os.File, RawConn.Read) and epoll_wait runs with a zero
// timeout; the read deadline is the sweep's tick.
func (s *Server) startPoller() {
	p := &s.park
	if p.running || s.o.parkTick < 0 {
		return
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err == nil {
		err = unix.SetNonblock(epfd, true)
	}
	var f *os.File
	var rc syscall.RawConn
	if err == nil {
		f = os.NewFile(uintptr(epfd), "http1-parked")
		rc, err = f.SyscallConn()
	}
	if err != nil {
		// Idle connections then keep their goroutine.
		s.log.Warn("http1: creating the epoll instance for idle connections", "error", err)
		if f != nil {
			f.Close()
		} else if epfd >= 0 {
			unix.Close(epfd)
		}
		return
	}
	p.epfd, p.running = epfd, true
	go s.poll(f, rc)
}

// poll waits for parked connections to become readable, starts their new
// loops, and sweeps every parkTick, until the server has no connection.
func (s *Server) poll(f *os.File, rc syscall.RawConn) {
	tick := s.o.parkTick
	events := make([]unix.EpollEvent, 256)
	var ready []*conn
	var n int
	var werr error
	wait := func(fd uintptr) bool {
		for {
			n, werr = unix.EpollWait(int(fd), events, 0)
			if !errors.Is(werr, unix.EINTR) {
				return n > 0 || werr != nil
			}
		}
	}
	last := time.Now()
	for {
		n, werr = 0, nil
		f.SetReadDeadline(last.Add(tick))
		if err := rc.Read(wait); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			werr = err
		}
		if werr != nil {
			s.log.Error("http1: waiting for parked connections", "error", werr)
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
			f.Close()
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
