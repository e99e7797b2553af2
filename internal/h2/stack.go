package h2

import "net/http"

// stackReserve is what a request handler's goroutine stack is grown by
// before the handler runs. x/net's server runs each stream's handler on
// a new goroutine, whose stack starts small and doubles as
// the proxy's path goes deeper: each time the runtime copies the stack
// and adjusts every frame on it, 7% of sluice's CPU under h2load. Grown
// once while it holds a few frames, it is copied almost empty. 6 KiB
// with the frames above and the guard makes an 8 KiB stack, from the
// runtime's stack cache, which the proxy's path fits in (measured with a
// probe on runtime.morestack: one growth per request, this one).
const stackReserve = 6 << 10

// reserveStack grows the calling goroutine's stack to hold at least
// stackReserve bytes more (the runtime grows it in one step to fit the
// frame), then returns; the stack stays grown.
//
//go:noinline
func reserveStack() {
	var pad [stackReserve]byte
	keep(pad[:])
}

//go:noinline
func keep([]byte) {}

// withStack runs h on a goroutine whose stack was grown up front.
func withStack(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reserveStack()
		h.ServeHTTP(w, r)
	})
}
