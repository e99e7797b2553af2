package http1

import (
	"io"
	"net"
	"os"
	"syscall"
)

// Socket I/O with recv(2) and send(2). Go's net package reads and writes
// sockets with read(2) and write(2), which pass the kernel's file layer
// (the descriptor's position lock, access and notification hooks) before
// they reach the socket; recv(2) and send(2) go to the socket directly,
// and are what HAProxy and nginx call. A keep-alive request through the
// proxy makes four of these calls (the client's request and response, the
// pod's request and response); see docs/development-log.md (issue 29) for
// what it saves.

// SockIO reads and writes a connection's socket with recv(2) and send(2)
// through its syscall.RawConn, as net.Conn's Read and Write do with read
// and write: the runtime's poller waits while the socket is not ready,
// under the connection's deadlines, and the descriptor stays open
// meanwhile (a concurrent Close makes the call fail, never reach another
// descriptor). Errors are net.Conn's: a *net.OpError ("read" or "write"),
// io.EOF at the end of the stream. Read and Write may run at the same
// time, but not two Reads or two Writes: callers that may do that
// serialize them. The zero value is not usable: call Init.
type SockIO struct {
	nc  net.Conn
	raw syscall.RawConn
	r   sockOp
	w   sockOp
}

// sockOp is the state of one call, kept in SockIO so that the callback
// given to the RawConn is bound once (a closure per call would be an
// allocation).
type sockOp struct {
	f     func(fd uintptr) bool
	p     []byte
	n     int
	errno syscall.Errno
	// notSock: the descriptor is not a socket (recv and send fail with
	// ENOTSOCK): read and write from then on.
	notSock bool
}

// Init makes s read and write nc's socket through raw (nc's
// SyscallConn), which must stay valid while s is used. nc gives the
// addresses of errors; nil for none.
func (s *SockIO) Init(nc net.Conn, raw syscall.RawConn) {
	s.nc, s.raw = nc, raw
	s.r.f = s.recvOnce
	s.w.f = s.sendAll
}

// Read reads into p as net.Conn.Read does.
func (s *SockIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil // as net.Conn: a zero-byte read waits for nothing
	}
	op := &s.r
	op.p, op.n, op.errno = p, 0, 0
	err := s.raw.Read(op.f)
	n := op.n
	op.p = nil
	if err = s.opError("read", err, op.errno); err != nil {
		return n, err
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// Write writes p whole (or fails) as net.Conn.Write does.
func (s *SockIO) Write(p []byte) (int, error) {
	op := &s.w
	op.p, op.n, op.errno = p, 0, 0
	err := s.raw.Write(op.f)
	n := op.n
	op.p = nil
	if err = s.opError("write", err, op.errno); err != nil {
		return n, err
	}
	if n < len(p) {
		return n, s.newError("write", io.ErrUnexpectedEOF)
	}
	return n, nil
}

// recvOnce is the RawConn callback of Read: one recv(2); false (wait for
// the poller) if nothing is there.
func (s *SockIO) recvOnce(fd uintptr) bool {
	op := &s.r
	for {
		n, e := sockRecv(fd, op.p, op.notSock)
		if e == syscall.ENOTSOCK && !op.notSock {
			op.notSock = true
			continue
		}
		switch e {
		case 0:
			op.n = n
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		op.errno = e
		return true
	}
}

// sendAll is the RawConn callback of Write: send(2) until everything is
// written; false (wait for the poller) when the socket's buffer is full.
func (s *SockIO) sendAll(fd uintptr) bool {
	op := &s.w
	for op.n < len(op.p) {
		n, e := sockSend(fd, op.p[op.n:], op.notSock)
		if e == syscall.ENOTSOCK && !op.notSock {
			op.notSock = true
			continue
		}
		switch e {
		case 0:
			if n <= 0 {
				return true // not reached for a socket; Write reports it
			}
			op.n += n
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			op.errno = e
			return true
		}
	}
	return true
}

// opError is the error of a call as net.Conn's: err from the RawConn
// (deadline, closed), with the operation's name, or the system call's
// errno.
func (s *SockIO) opError(op string, err error, errno syscall.Errno) error {
	if err != nil {
		if oe, ok := err.(*net.OpError); ok {
			oe.Op = op // "raw-read" or "raw-write"
		}
		return err
	}
	if errno == 0 {
		return nil
	}
	return s.newError(op, os.NewSyscallError(op, errno))
}

func (s *SockIO) newError(op string, err error) error {
	e := &net.OpError{Op: op, Err: err}
	if s.nc != nil {
		e.Source, e.Addr = s.nc.LocalAddr(), s.nc.RemoteAddr()
		if e.Source != nil {
			e.Net = e.Source.Network()
		}
	}
	return e
}
