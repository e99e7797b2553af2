//go:build linux && (amd64 || arm64)

package http1

import (
	"syscall"
	"unsafe"
)

// sockRecv is recv(2) (recvfrom without an address) on fd, or read(2)
// when notSock.
func sockRecv(fd uintptr, p []byte, notSock bool) (int, syscall.Errno) {
	var b unsafe.Pointer
	if len(p) > 0 {
		b = unsafe.Pointer(&p[0])
	}
	trap := uintptr(syscall.SYS_RECVFROM)
	if notSock {
		trap = syscall.SYS_READ
	}
	n, _, e := syscall.Syscall6(trap, fd, uintptr(b), uintptr(len(p)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}

// sockSend is send(2) (sendto without an address) on fd, with
// MSG_NOSIGNAL (a closed peer is EPIPE, never SIGPIPE), or write(2) when
// notSock.
func sockSend(fd uintptr, p []byte, notSock bool) (int, syscall.Errno) {
	var b unsafe.Pointer
	if len(p) > 0 {
		b = unsafe.Pointer(&p[0])
	}
	trap, flags := uintptr(syscall.SYS_SENDTO), uintptr(syscall.MSG_NOSIGNAL)
	if notSock {
		trap, flags = syscall.SYS_WRITE, 0
	}
	n, _, e := syscall.Syscall6(trap, fd, uintptr(b), uintptr(len(p)), flags, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}
