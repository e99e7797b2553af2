//go:build !(linux && (amd64 || arm64))

package http1

import "syscall"

// sockRecv is read(2) on fd: elsewhere SockIO keeps to read and write.
func sockRecv(fd uintptr, p []byte, _ bool) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return n, errno(err)
}

// sockSend is write(2) on fd.
func sockSend(fd uintptr, p []byte, _ bool) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return n, errno(err)
}

func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EIO
}
