//go:build !linux

package http1

import "errors"

// Parking needs epoll: elsewhere idle connections keep their goroutine.
const parkSupported = false

type poller struct{}

func (s *Server) startPoller() {}

func (p *parking) register(*conn) error { return errors.ErrUnsupported }

func (p *parking) deregister(*conn) {}
