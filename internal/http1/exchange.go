package http1

import "net/http"

// With Options.RecycleRequests, exchanges are recycled through the
// server's pool: an exchange is about a kilobyte (the response state, the
// request, its URL and field values) and the most of what a request
// allocates. One goes back to the pool only when nothing can still hold
// it: the handler returned, the connection stays, and nobody took the
// request's cancelable context (a transport, a context.AfterFunc, a
// derived context all do, and their exchange is left to the garbage
// collector). The handler must not use the request once it returned, as
// with the ResponseWriter. The request's header map is kept for the next
// request, emptied.

// newExchange returns an exchange for c's next request, recycled if the
// pool has one.
func (c *conn) newExchange() *exchange {
	x, _ := c.s.xs.Get().(*exchange)
	if x == nil {
		return &exchange{c: c}
	}
	h := x.hdr
	*x = exchange{c: c, hdr: h}
	return x
}

// recycle puts x back in the pool once its request is done on a
// connection that stays, unless something may still hold it.
func (c *conn) recycle(x *exchange) {
	if !c.s.o.RecycleRequests {
		return
	}
	x.ctx.mu.Lock()
	held := x.ctx.inner != nil
	x.ctx.mu.Unlock()
	if held {
		return
	}
	h := x.req.Header
	if len(h) > maxReusedFields {
		h = nil // a map keeps the room it grew to
	}
	clear(h)
	*x = exchange{hdr: h}
	c.s.xs.Put(x)
}

// header returns the empty header map for x's request: the recycled
// one, or a new one with room for n fields.
func (x *exchange) header(n int) http.Header {
	if x.hdr != nil {
		return x.hdr
	}
	return make(http.Header, n)
}
