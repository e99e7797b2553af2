// Package provider turns a LoadBalancerBinding's spec.provider into an
// lb.Provider and the group to use, caching one provider per load-balancer
// address so that bindings sharing an HAProxy share its client. It sits at
// the apply end of the binding reconciler:
//
//	binding spec ─► Cache.For ─► lb.Provider (haproxy, later aws) ─► Register/Deregister
package provider

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/lb"
	"sluice.dev/sluice/internal/lb/haproxy"
)

// ErrNotSupported: the binding names a provider this build cannot drive yet.
var ErrNotSupported = errors.New("load-balancer provider not supported")

// Options configures a Cache.
type Options struct {
	// HAProxy is the template for HAProxy providers; Address is filled in
	// from each binding's runtimeAPI. Zero: the haproxy package defaults.
	HAProxy haproxy.Options
}

// Cache builds providers and keeps them by configuration. Safe for
// concurrent use.
type Cache struct {
	opts Options
	mu   sync.Mutex
	byID map[string]lb.Provider
}

// New returns an empty Cache.
func New(o Options) *Cache {
	return &Cache{opts: o, byID: map[string]lb.Provider{}}
}

// For returns the provider and group for spec. Errors wrap
// ErrNotSupported (AWS, for now) or lb.ErrInvalid (a malformed address).
func (c *Cache) For(spec v1alpha1.ProviderSpec) (lb.Provider, string, error) {
	switch {
	case spec.HAProxy != nil && spec.AWS == nil:
		addr, err := RuntimeAddress(spec.HAProxy.RuntimeAPI)
		if err != nil {
			return nil, "", err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		id := "haproxy " + addr
		if p, ok := c.byID[id]; ok {
			return p, spec.HAProxy.Backend, nil
		}
		o := c.opts.HAProxy
		o.Address = addr
		p, err := haproxy.New(o)
		if err != nil {
			return nil, "", fmt.Errorf("creating provider for %s: %w", spec.HAProxy.RuntimeAPI, err)
		}
		c.byID[id] = p
		return p, spec.HAProxy.Backend, nil
	case spec.AWS != nil && spec.HAProxy == nil:
		return nil, "", fmt.Errorf("using aws target groups: %w", ErrNotSupported)
	default:
		return nil, "", fmt.Errorf("choosing a provider: exactly one of haproxy or aws must be set: %w", lb.ErrInvalid)
	}
}

// RuntimeAddress converts a runtimeAPI URL ("unix:///path", "tcp://host:port")
// into a haproxy.Options.Address.
func RuntimeAddress(u string) (string, error) {
	switch {
	case strings.HasPrefix(u, "unix://") && len(u) > len("unix://"):
		return "unix:" + strings.TrimPrefix(u, "unix://"), nil
	case strings.HasPrefix(u, "tcp://") && len(u) > len("tcp://") && !strings.Contains(u[len("tcp://"):], "/"):
		return strings.TrimPrefix(u, "tcp://"), nil
	default:
		return "", fmt.Errorf("parsing runtime API address %q: want unix:///path or tcp://host:port: %w", u, lb.ErrInvalid)
	}
}
