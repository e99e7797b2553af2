package h2

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestWithStack: the wrapped handler runs once, with the request and
// writer it was given.
func TestWithStack(t *testing.T) {
	calls := 0
	req := httptest.NewRequest("GET", "/x", nil)
	rec := httptest.NewRecorder()
	withStack(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if w != http.ResponseWriter(rec) || r != req {
			t.Error("handler got another writer or request")
		}
		w.WriteHeader(http.StatusTeapot)
	})).ServeHTTP(rec, req)
	if calls != 1 || rec.Code != http.StatusTeapot {
		t.Errorf("calls %d, status %d; want 1, 418", calls, rec.Code)
	}
}

// BenchmarkWithStack: a handler whose path needs a few KiB of stack, on
// a new goroutine per request as x/net's server runs it, with the stack
// grown up front and without.
func BenchmarkWithStack(b *testing.B) {
	deep := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { useStack(24) })
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{{"plain", deep}, {"reserved", withStack(deep)}} {
		b.Run(bc.name, func(b *testing.B) {
			done := make(chan struct{})
			for b.Loop() {
				go func() {
					bc.h.ServeHTTP(nil, nil)
					done <- struct{}{}
				}()
				<-done
			}
		})
	}
}

// useStack recurses n frames of 256 bytes each.
//
//go:noinline
func useStack(n int) byte {
	var pad [256]byte
	pad[n%len(pad)] = byte(n)
	if n == 0 {
		return pad[0]
	}
	return useStack(n-1) + pad[(n*7)%len(pad)]
}
