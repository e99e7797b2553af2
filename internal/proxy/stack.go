package proxy

// net/http's HTTP/2 server runs every stream's handler on a new goroutine,
// which starts with a small stack (the average in use at the last GC, most
// of it parked connection goroutines) and doubles it each time the
// handler's calls go deeper: several copies per request, each walking every
// frame on the stack (about an eighth of the CPU of an HTTP/2 request).
// growStack takes the room the handler needs in one step, while the stack
// is still shallow and cheap to copy. The HTTP/1.1 loop serves requests on
// the connection's goroutine, whose stack stays grown.

// handlerStack is the frame growStack asks room for: the runtime doubles
// the stack until the frame fits, to 8 KiB from the usual 2 KiB start.
// (A 8 KiB frame, so a 16 KiB stack, measured the same.)
const handlerStack = 4 << 10

// growStack makes the calling goroutine's stack hold a frame of
// handlerStack bytes (the runtime grows it once, to fit the frame).
//
//go:noinline
func growStack() {
	var b [handlerStack]byte
	touch(b[:])
}

//go:noinline
func touch(b []byte) { b[0] = 0 }
