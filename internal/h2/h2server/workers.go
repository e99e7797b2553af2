// sluice: handler goroutines that outlive their streams (see NOTICE).

package h2server

import (
	"net/http"
	"sync"
)

// maxIdleWorkers bounds the handler goroutines kept waiting for a
// stream, across every connection of the process. An idle worker holds
// its stack (grown to 8 KiB by the proxy's path; the garbage collector
// halves an idle goroutine's stack at each cycle, down to 2 KiB) and
// nothing else.
const maxIdleWorkers = 256

// handlerWorkers runs every connection's handlers. It is one for the
// process, like the response writer's pools: the stacks it keeps are
// the process's, not a connection's.
var handlerWorkers workerPool

// workerPool keeps the goroutines that ran a handler to run the next
// one. Upstream starts a goroutine per stream: a fresh, small stack
// that the proxy's path then grows (a copy), a goroutine created and
// ended per request. A worker's stack stays grown; handing it a stream
// is a send on its channel.
type workerPool struct {
	mu   sync.Mutex
	idle []*worker // the most recently idle last: its stack is the warmest

	started int // goroutines started, for tests
}

// worker is an idle goroutine's mailbox.
type worker struct {
	job chan handlerJob // buffered: the sender never waits
}

// handlerJob is what `go sc.runHandler(rw, req, handler)` starts.
type handlerJob struct {
	sc      *serverConn
	rw      *responseWriter
	req     *http.Request
	handler func(http.ResponseWriter, *http.Request)
}

// startHandler runs the stream's handler on an idle worker, or on a new
// goroutine when none is idle. runHandler's recovery and its message to
// the serve loop are the same either way; a handler that panics leaves
// its worker alive (runHandler recovers), one that calls runtime.Goexit
// ends it.
func (sc *serverConn) startHandler(rw *responseWriter, req *http.Request, handler func(http.ResponseWriter, *http.Request)) {
	handlerWorkers.run(handlerJob{sc: sc, rw: rw, req: req, handler: handler})
}

func (p *workerPool) run(j handlerJob) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.job <- j
		return
	}
	p.started++
	p.mu.Unlock()
	go p.work(j)
}

// work runs j, then every job it is handed, until the pool has
// maxIdleWorkers idle already.
func (p *workerPool) work(j handlerJob) {
	var w *worker
	for {
		j.sc.runHandler(j.rw, j.req, j.handler)
		j = handlerJob{} // hold no request while idle
		if w == nil {
			w = &worker{job: make(chan handlerJob, 1)}
		}
		p.mu.Lock()
		if len(p.idle) >= maxIdleWorkers {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, w)
		p.mu.Unlock()
		j = <-w.job
	}
}

// idleWorkers and startedWorkers are for tests.
func (p *workerPool) idleWorkers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

func (p *workerPool) startedWorkers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started
}
