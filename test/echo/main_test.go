package main

import (
	"context"
	"testing"
	"time"
)

func TestHold(t *testing.T) {
	for _, bad := range []string{"x", "-1s", "11s", "1e9h"} {
		if err := hold(context.Background(), bad); err == nil {
			t.Errorf("hold(%q): no error", bad)
		}
	}
	if err := hold(context.Background(), "1ms"); err != nil {
		t.Errorf("hold(1ms): %v", err)
	}
	// A canceled request does not wait out its delay.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() { done <- hold(ctx, "10s") }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("hold(10s) canceled: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("hold(10s) ignored its canceled context")
	}
}
