package http1

import (
	"context"
	"sync"
	"time"
)

// reqContext is a request's context. net/http gives every request a
// cancelable context and a background read that cancels it when the
// client goes away: a goroutine hand-off and a read per request. Here
// both start only when somebody waits on the context (Done, or
// context.AfterFunc, which uses the AfterFunc method); the proxy does so
// only for responses that take a while. Values, deadline and cancellation
// come from the connection's context. The context is done once the
// handler has returned.
type reqContext struct {
	x      *exchange
	parent context.Context

	mu       sync.Mutex
	inner    context.Context // nil until first needed
	cancel   context.CancelFunc
	finished bool
}

var _ context.Context = (*reqContext)(nil)

func (c *reqContext) Deadline() (time.Time, bool) { return c.parent.Deadline() }

func (c *reqContext) Value(key any) any { return c.parent.Value(key) }

func (c *reqContext) Done() <-chan struct{} { return c.lazy().Done() }

func (c *reqContext) Err() error {
	c.mu.Lock()
	inner, finished := c.inner, c.finished
	c.mu.Unlock()
	if inner != nil {
		return inner.Err()
	}
	if finished {
		return context.Canceled
	}
	return c.parent.Err()
}

// AfterFunc is used by context.AfterFunc and by contexts derived from this
// one, instead of a goroutine waiting on Done.
func (c *reqContext) AfterFunc(f func()) (stop func() bool) {
	return context.AfterFunc(c.lazy(), f)
}

func (c *reqContext) String() string { return "http1.reqContext" }

// lazy returns the cancelable context, creating it and starting the
// background read on first use.
func (c *reqContext) lazy() context.Context {
	c.mu.Lock()
	if c.inner != nil {
		defer c.mu.Unlock()
		return c.inner
	}
	inner, cancel := context.WithCancel(c.parent)
	c.inner, c.cancel = inner, cancel
	finished := c.finished
	c.mu.Unlock()
	if finished {
		cancel()
		return inner
	}
	b := &c.x.body
	b.mu.Lock()
	eof := b.eof
	if !eof {
		b.watch = cancel // started by the body's end
	}
	b.mu.Unlock()
	if eof {
		c.x.c.startBackgroundRead(c.x, cancel)
	}
	return inner
}

// finish marks the handler returned: the context is canceled.
func (c *reqContext) finish() {
	c.mu.Lock()
	c.finished = true
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}
