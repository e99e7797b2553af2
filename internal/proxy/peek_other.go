//go:build !linux

package proxy

// alive cannot peek on this platform; a closed idle connection shows up as
// a failed request instead.
func (hc *h1conn) alive() bool { return true }

// readNow reads nothing without waiting on this platform.
func (hc *h1conn) readNow(p []byte) int { return 0 }

// broken cannot peek on this platform: a failed copy is the upstream's.
func (hc *h1conn) broken() bool { return true }

// acked cannot read the acknowledged bytes on this platform: a request
// that may not be sent again is not sent again.
func (hc *h1conn) acked() int64 { return -1 }
