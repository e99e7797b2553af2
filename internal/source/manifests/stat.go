package manifests

import (
	"os"
	"syscall"
)

// fingerprint tells whether a file may have changed since it was read. The
// inode catches files replaced by rename (editors, kubectl cp, the atomic
// ..data swap of ConfigMap volumes) even when size and mtime match.
type fingerprint struct {
	modTime int64 // UnixNano
	size    int64
	dev     uint64
	ino     uint64
}

func fingerprintOf(fi os.FileInfo) fingerprint {
	fp := fingerprint{modTime: fi.ModTime().UnixNano(), size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		fp.dev, fp.ino = uint64(st.Dev), st.Ino
	}
	return fp
}
