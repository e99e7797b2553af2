//go:build !linux

package manifests

import "errors"

// watcher is Linux only (inotify); elsewhere the source polls.
type watcher struct{ wake chan struct{} }

func newWatcher() (*watcher, error) {
	return nil, errors.New("watching files is only supported on Linux")
}

func (w *watcher) watch([]string) error { return nil }

func (w *watcher) close() {}
