package proxy

import "syscall"

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
