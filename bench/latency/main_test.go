package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"sluice.dev/sluice/bench/internal/result"
)

func TestRunCountsEveryRequest(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		wantFailed int64
	}{
		{"ok", http.StatusOK, 0},
		{"5xx", http.StatusBadGateway, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				w.Write([]byte("hello"))
			}))
			defer srv.Close()
			var rec result.Record
			o := Options{Addr: strings.TrimPrefix(srv.URL, "http://"), Host: "x", Rate: 500,
				Duration: 200 * time.Millisecond, Conns: 4, Timeout: 2 * time.Second}
			err := run(context.Background(), &rec, o)
			if tc.wantFailed == 0 && err != nil {
				t.Fatal(err)
			}
			if rec.Sent != 100 || rec.Failed != tc.wantFailed {
				t.Errorf("sent %d failed %d, want 100 and %d (%v)", rec.Sent, rec.Failed, tc.wantFailed, rec.Samples)
			}
			if tc.wantFailed == 0 && (rec.P50Us <= 0 || rec.P99Us < rec.P50Us || rec.MaxUs < rec.P99Us) {
				t.Errorf("percentiles p50 %v p99 %v max %v", rec.P50Us, rec.P99Us, rec.MaxUs)
			}
		})
	}
}

func TestRunRefusesNonLoopback(t *testing.T) {
	var rec result.Record
	if err := run(context.Background(), &rec, Options{Addr: "192.0.2.1:80", Rate: 1, Duration: time.Second, Conns: 1}); err == nil {
		t.Error("run accepted a non-loopback target")
	}
}
