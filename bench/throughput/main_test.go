package main

import "testing"

const wrkOK = `Running 10s test @ http://127.0.0.1:24083/
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     2.10ms  400.00us   8.00ms   90.00%
    Req/Sec    30.50k     1.20k   33.00k    80.00%
  303456 requests in 10.00s, 50.00MB read
Requests/sec:  30345.60
Transfer/sec:      5.00MB
`

const wrkErrors = `Running 10s test @ http://127.0.0.1:24081/
  1 threads and 64 connections
  1200 requests in 10.00s, 200.00KB read
  Socket errors: connect 0, read 3, write 1, timeout 2
  Non-2xx or 3xx responses: 7
Requests/sec:    120.00
Transfer/sec:     20.00KB
`

func TestParseWrk(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want wrkResult
	}{
		{"clean", wrkOK, wrkResult{requests: 303456, rps: 30345.60}},
		{"errors", wrkErrors, wrkResult{requests: 1200, rps: 120, non2xx: 7, socketErrors: 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseWrk(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("parseWrk = %+v, want %+v", got, tc.want)
			}
		})
	}
	if _, err := parseWrk("unable to connect to 127.0.0.1:1 Connection refused"); err == nil {
		t.Error("parseWrk accepted output without a request count")
	}
}
