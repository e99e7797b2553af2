package proxy

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// alive peeks at an idle connection without blocking: false if the
// upstream closed it, reset it, or sent bytes nobody asked for.
func (hc *h1conn) alive() bool {
	if hc.raw == nil {
		return true
	}
	ok := true
	err := hc.raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ok = n < 0 && (err == syscall.EAGAIN || err == syscall.EWOULDBLOCK)
		return true // never wait for readiness
	})
	return ok && err == nil
}

// readNow reads into p what the connection holds, without waiting: 0 if
// nothing is there (or the read fails: the next read sees it again).
// Only for a connection whose bufio.Reader is empty.
func (hc *h1conn) readNow(p []byte) int {
	if hc.raw == nil {
		return 0
	}
	n := 0
	hc.raw.Read(func(fd uintptr) bool {
		if k, err := syscall.Read(int(fd), p); err == nil && k > 0 {
			n = k
		}
		return true // never wait for readiness
	})
	return n
}

// broken reports whether the connection was closed or reset by the
// upstream (a peek finds its end or an error; data or nothing yet means
// it is fine).
func (hc *h1conn) broken() bool {
	if hc.raw == nil {
		return true
	}
	broken := false
	err := hc.raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		broken = n == 0 && err == nil || err != nil && err != syscall.EAGAIN && err != syscall.EWOULDBLOCK
		return true // never wait for readiness
	})
	return broken || err != nil
}

// acked returns how many bytes of the connection's outgoing stream the
// upstream's kernel has acknowledged (TCP_INFO's bytes_acked, which counts
// the SYN), or -1 if that cannot be read.
func (hc *h1conn) acked() int64 {
	if hc.raw == nil {
		return -1
	}
	n := int64(-1)
	hc.raw.Control(func(fd uintptr) {
		if ti, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			n = int64(ti.Bytes_acked)
		}
	})
	return n
}
