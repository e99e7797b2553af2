//go:build linux

package manifests

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// watchMask is what wakes the poll loop: a file or directory created,
// removed, renamed, written or its attributes changed. Reading files (as
// the source does) is not in it.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// watcher wakes the poll loop when something changes in Dir or in the
// subdirectories it reads (inotify), so that a change is seen at once
// instead of at the next tick. It only says "look now": what changed is
// still found by the poll.
type watcher struct {
	f    *os.File
	fd   int
	wake chan struct{}
}

func newWatcher() (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	// Non-blocking: Read waits in Go's poller, and Close ends it.
	w := &watcher{f: os.NewFile(uintptr(fd), "inotify"), fd: fd, wake: make(chan struct{}, 1)}
	go w.read()
	return w, nil
}

func (w *watcher) read() {
	buf := make([]byte, 16<<10)
	for {
		if _, err := w.f.Read(buf); err != nil {
			return // closed (or an error the poll ticker covers for)
		}
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// watch adds (or renews: adding a watched inode again only updates it)
// watches on dirs. Renewing each time catches directories that were
// removed and made again, and symlinks now pointing elsewhere.
func (w *watcher) watch(dirs []string) error {
	var first error
	for _, d := range dirs {
		if _, err := unix.InotifyAddWatch(w.fd, d, watchMask); err != nil && first == nil {
			first = fmt.Errorf("watching %s: %w", d, err)
		}
	}
	return first
}

func (w *watcher) close() { w.f.Close() }
