package http1

import (
	"bufio"
	"io"
	"os"
	"syscall"
)

// An idle connection holds no read buffer: between requests the loop waits
// for readability with the poller and takes a buffer from the pool only
// once bytes are there. With 10,000 idle keep-alive connections that is
// 40 MiB less.
//
// The wait is syscall.RawConn.Read with a callback that, every time it is
// called, takes a buffer and tries the read, and on EAGAIN puts the buffer
// back and returns false: what the runtime's own netFD.Read does. A
// callback that returned false without trying would lose a wakeup: RawRead
// resets the poller's readiness before calling it (prepareRead), so bytes
// that arrived before then would never wake the wait.

// rawConn is the part of net.TCPConn (syscall.Conn) the idle wait needs.
type rawConn interface {
	SyscallConn() (syscall.RawConn, error)
}

// initIdleWait prepares the idle wait for c, when nc gives access to its
// file descriptor. Without it (an in-memory or wrapped connection), the
// loop keeps its buffer while idle.
func (c *conn) initIdleWait() {
	rc, ok := c.nc.(rawConn)
	if !ok {
		return
	}
	raw, err := rc.SyscallConn()
	if err != nil {
		return
	}
	c.raw = raw
	c.tryRead = c.tryIdleRead // bound once: no allocation per wait
}

// waitIdle gives c's read buffer back to the pool, waits until the client
// sends something, and returns with c.br holding at least one byte, or
// with the error that ended the wait (a deadline, EOF, a reset). c.br is
// never nil when it returns. It needs nothing buffered (br and cr empty).
// A keep-alive wait (not first) may instead park the connection
// (park.go): it then returns errParked, and c is no longer the caller's.
func (c *conn) waitIdle(first bool) error {
	c.br.Reset(nil)
	c.s.brs.Put(c.br)
	c.br = nil
	c.idleErr = nil
	if c.s.o.idleWait != nil {
		c.s.o.idleWait()
	}
	parkable := c.beginWait(first)
	err := c.raw.Read(c.tryRead)
	if parkable && c.endWait() && c.afterWait(err) {
		return errParked
	}
	if c.br == nil {
		// The wait ended without a read (deadline, closed): the rest of
		// the loop still expects a reader.
		c.br = c.s.brs.Get().(*bufio.Reader)
		c.br.Reset(&c.cr)
	}
	if err != nil {
		return err
	}
	return c.idleErr
}

// tryIdleRead is the RawConn callback: a buffer from the pool and one read
// into it; on EAGAIN the buffer goes back and the wait goes on.
func (c *conn) tryIdleRead(fd uintptr) bool {
	br := c.s.brs.Get().(*bufio.Reader)
	br.Reset(&c.cr)
	c.cr.fd, c.cr.direct = int(fd), true
	_, err := br.Peek(1) // one read(2) through cr.Read
	c.cr.direct = false
	if err == syscall.EAGAIN {
		br.Reset(nil)
		c.s.brs.Put(br)
		return false
	}
	c.br, c.idleErr = br, err
	return true
}

// readDirect is connReader.Read inside the idle wait's callback: recv(2)
// on the descriptor (read(2) if it is not a socket; sock.go), as
// netFD.Read reads, EAGAIN passed through.
func (r *connReader) readDirect(p []byte) (int, error) {
	for {
		n, e := sockRecv(uintptr(r.fd), p, r.notSock)
		switch {
		case e == syscall.ENOTSOCK && !r.notSock:
			r.notSock = true
			continue
		case e == syscall.EINTR:
			continue
		case e == syscall.EAGAIN:
			return 0, e
		case e != 0:
			return 0, os.NewSyscallError("read", e)
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}
