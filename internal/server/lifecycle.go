package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// State is a step of the server's lifecycle. It only moves forward.
type State int32

const (
	// StateServing: health endpoints report the readiness of the routing
	// table; connections are kept alive.
	StateServing State = iota
	// StateDraining: health endpoints answer 503 so the load balancer
	// stops sending; the listeners keep accepting and serving, and every
	// response asks its connection to close (Connection: close, HTTP/2
	// GOAWAY).
	StateDraining
	// StateStopping: the traffic listeners are closed; in-flight requests
	// and upgraded connections get until the shutdown deadline.
	StateStopping
	// StateExited: every traffic connection is gone; Run is returning.
	StateExited
)

func (s State) String() string {
	switch s {
	case StateServing:
		return "serving"
	case StateDraining:
		return "draining"
	case StateStopping:
		return "stopping"
	case StateExited:
		return "exited"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// ErrForced is returned by Run when a signal during stopping made it close
// the remaining connections without waiting for the shutdown deadline.
var ErrForced = errors.New("stop forced by signal: connections closed without waiting")

// State returns the current lifecycle state.
func (s *Server) State() State { return State(s.state.Load()) }

func (s *Server) transition(to State, reason string) {
	s.mu.Lock()
	from := s.State()
	elapsed := time.Since(s.since)
	s.since = time.Now()
	s.history = append(s.history, transition{to, reason})
	s.state.Store(int32(to))
	s.mu.Unlock()
	s.m.setState(to)
	s.log.Info("lifecycle transition", "from", from.String(), "state", to.String(), "reason", reason, "elapsed", elapsed)
}

// closeReason is the reason recorded for a connection that closes now of
// its own accord (client, idle timeout, Connection: close, GOAWAY).
func (s *Server) closeReason() string {
	if s.State() == StateServing {
		return reasonServing
	}
	return reasonDrain
}

// Run serves until the lifecycle ends and returns nil after a clean stop.
//
// The first value on signals starts draining (or stopping, if DrainMaxWait
// is negative); a second one during draining skips to stopping; one during
// stopping closes every connection at once and makes Run return ErrForced.
// Cancelling ctx skips draining and starts stopping. Draining ends at the
// first of: Drained closed, DrainMaxWait elapsed, DrainQuietPeriod without a
// new connection carrying traffic (see Options.DrainQuietPeriod). The admin listener serves until Run returns. A
// listener failing while serving also leads to stopping, and Run returns
// that error.
func (s *Server) Run(ctx context.Context, signals <-chan os.Signal) error {
	s.mu.Lock()
	ran := s.ran
	s.ran = true
	s.mu.Unlock()
	if ran {
		return errors.New("running server: Run called twice")
	}

	serveErr := make(chan error, 3)
	var traffic, admin sync.WaitGroup
	serve := func(wg *sync.WaitGroup, srv *http.Server, l net.Listener) {
		if l == nil {
			return
		}
		wg.Go(func() {
			if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
				serveErr <- fmt.Errorf("serving %s: %w", l.Addr(), err)
			}
		})
	}
	// The admin server first: /healthz answers while the traffic
	// listeners wait for the first routing table (deferTraffic).
	serve(&admin, s.admin, s.adminLn)
	if s.deferTraffic {
		if err := s.bindWhenReady(ctx, signals); err != nil {
			s.transition(StateExited, err.Error())
			s.admin.Close()
			admin.Wait()
			if errors.Is(err, errStoppedBeforeReady) {
				return nil
			}
			return err
		}
	}
	if s.fast != nil {
		acceptFast := func(l net.Listener, serveConn func(net.Conn)) {
			if l == nil {
				return
			}
			traffic.Go(func() {
				if err := s.acceptFast(l, serveConn); err != nil {
					serveErr <- fmt.Errorf("serving %s: %w", l.Addr(), err)
				}
			})
		}
		acceptFast(s.httpLn, s.fast.ServeConn)
		acceptFast(s.httpsLn, func(c net.Conn) { s.fast.ServeTLS(tls.Server(c, s.tlsConf)) })
		serve(&traffic, s.traffic, s.handoff)
	} else {
		serve(&traffic, s.traffic, s.httpLn)
		serve(&traffic, s.traffic, s.httpsLn)
	}
	httpAddr, httpsAddr, adminAddr := s.Addrs()
	s.log.Info("serving", "http", httpAddr, "https", httpsAddr, "admin", adminAddr)

	reason, runErr := s.serving(ctx, signals, serveErr)
	if s.State() == StateDraining {
		reason, runErr = s.draining(ctx, signals, serveErr)
	}
	if err := s.stopping(reason, signals, &traffic); err != nil && runErr == nil {
		runErr = err
	}
	s.transition(StateExited, "all traffic connections closed")
	s.admin.Close()
	admin.Wait()
	return runErr
}

// errStoppedBeforeReady: a signal or the context ended the server before
// its first routing table, so no traffic listener was ever bound.
var errStoppedBeforeReady = errors.New("stopped before the first routing table loaded")

// bindWhenReady waits until Ready() is true, then binds the traffic
// listeners (and the fast loop on them). A signal or the end of ctx
// meanwhile returns errStoppedBeforeReady: there is nothing to drain.
func (s *Server) bindWhenReady(ctx context.Context, signals <-chan os.Signal) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !s.o.Ready() {
		select {
		case <-ctx.Done():
			return errStoppedBeforeReady
		case _, ok := <-signals:
			if ok {
				return errStoppedBeforeReady
			}
			signals = nil
		case <-tick.C:
		}
	}
	// Under mu: Addrs may be called meanwhile.
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.bindTraffic(); err != nil {
		return err
	}
	s.newFast()
	return nil
}

// serving waits for the end of serving. It returns the reason for
// stopping, or enters draining and returns.
func (s *Server) serving(ctx context.Context, signals <-chan os.Signal, serveErr <-chan error) (string, error) {
	for {
		select {
		case <-ctx.Done():
			return "context canceled", nil
		case err := <-serveErr:
			return "listener failed", err
		case sig, ok := <-signals:
			if !ok {
				signals = nil
				continue
			}
			if s.o.DrainMaxWait < 0 {
				return fmt.Sprintf("signal %v, draining disabled", sig), nil
			}
			s.transition(StateDraining, fmt.Sprintf("signal %v", sig))
			return "", nil
		}
	}
}

// draining waits for the end of draining and returns why it ended.
func (s *Server) draining(ctx context.Context, signals <-chan os.Signal, serveErr <-chan error) (string, error) {
	start := time.Now()
	defer func() { s.m.drainSeconds.Set(time.Since(start).Seconds()) }()
	maxWait := time.NewTimer(s.o.DrainMaxWait)
	defer maxWait.Stop()
	var quietTimer *time.Timer
	var quiet <-chan time.Time
	if s.o.DrainQuietPeriod > 0 {
		quietTimer = time.NewTimer(s.o.DrainQuietPeriod)
		defer quietTimer.Stop()
		quiet = quietTimer.C
	}
	for {
		select {
		case <-s.o.Drained:
			return "pod drained", nil
		case <-maxWait.C:
			return fmt.Sprintf("drain max wait %v elapsed", s.o.DrainMaxWait), nil
		case <-ctx.Done():
			return "context canceled", nil
		case err := <-serveErr:
			return "listener failed", err
		case sig, ok := <-signals:
			if !ok {
				signals = nil
				continue
			}
			return fmt.Sprintf("second signal %v", sig), nil
		case <-quiet:
			last := time.Unix(0, s.tracker.lastTraffic.Load())
			if rest := quietRemaining(time.Now(), start, last, s.o.DrainQuietPeriod); rest > 0 {
				quietTimer.Reset(rest)
				continue
			}
			return fmt.Sprintf("no new connection carrying traffic for %v", s.o.DrainQuietPeriod), nil
		}
	}
}

// quietRemaining returns how much longer draining must see no new
// traffic before the quiet period is over; traffic seen before draining
// started does not count. lastTraffic is when the latest connection
// carrying traffic was first seen (tracker.lastTraffic).
func quietRemaining(now, drainStart, lastTraffic time.Time, quiet time.Duration) time.Duration {
	since := drainStart
	if lastTraffic.After(since) {
		since = lastTraffic
	}
	return since.Add(quiet).Sub(now)
}

// stopping closes the traffic listeners, lets in-flight requests and
// upgraded connections finish until the shutdown deadline, then closes
// whatever is left. traffic is done when the Serve calls have returned.
func (s *Server) stopping(reason string, signals <-chan os.Signal, traffic *sync.WaitGroup) error {
	s.transition(StateStopping, reason)
	grace := max(s.o.ShutdownTimeout, 0)
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	shutdown := make(chan error, 1)
	// Shutdown closes the listeners, closes idle HTTP/1 connections,
	// sends GOAWAY on HTTP/2 ones and waits for active ones to go idle.
	go func() { shutdown <- s.traffic.Shutdown(ctx) }()
	if s.fast != nil {
		// net/http does not know the fast loop's listeners and
		// connections: stop accepting, close the idle ones, and have the
		// others close after their response.
		for _, l := range []net.Listener{s.httpLn, s.httpsLn} {
			if l != nil {
				l.Close()
			}
		}
		s.fast.Shutdown()
	}
	traffic.Wait()
	// Serve closes its listener, except when Shutdown won the race
	// against a Serve that had not started yet.
	for _, l := range []net.Listener{s.httpLn, s.httpsLn} {
		if l != nil {
			l.Close()
		}
	}

	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	var forced error
wait:
	for {
		select {
		case <-s.tracker.empty():
			break wait
		case <-deadline.C:
			n := s.tracker.closeAll(func(hijacked bool) string {
				if hijacked {
					return reasonHijackedDeadline
				}
				return reasonShutdownDeadline
			})
			s.log.Warn("shutdown deadline reached, closed remaining connections", "connections", n, "timeout", grace)
			break wait
		case sig, ok := <-signals:
			if !ok {
				signals = nil
				continue
			}
			n := s.tracker.closeAll(func(bool) string { return reasonForced })
			s.log.Warn("stop forced by signal, closed remaining connections", "signal", sig, "connections", n)
			forced = ErrForced
			break wait
		}
	}
	s.traffic.Close()
	<-shutdown
	return forced
}

// acceptFast accepts connections on l for the fast HTTP/1.1 loop
// (serveConn, in a goroutine of its own) until l closes. Temporary errors
// (out of file descriptors) are retried with backoff, as net/http does.
func (s *Server) acceptFast(l net.Listener, serveConn func(net.Conn)) error {
	var delay time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("accepting connection, retrying", "error", err, "delay", delay)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		go serveConn(c)
	}
}

// isTemporary reports an accept error worth retrying (EMFILE, ENFILE,
// ECONNABORTED and the like), as net/http judges them.
func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}
