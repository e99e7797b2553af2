package proxy

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

var modeFlag = flag.String("proxy.mode", "both", "upstream path the tests run with: fast, std or both")

// stdMode makes front build proxies with Options.StdTransport. TestMain
// sets it before each run of the suite; tests only read it.
var stdMode bool

// TestMain runs the whole suite twice, on the synchronous HTTP/1.1 path and
// on net/http.Transport (Options.StdTransport), so that either can serve
// every request. Fuzzing and benchmarks run once.
func TestMain(m *testing.M) {
	flag.Parse()
	single := flag.Lookup("test.fuzz").Value.String() != "" || flag.Lookup("test.bench").Value.String() != ""
	modes := []bool{false, true}
	switch {
	case *modeFlag == "fast" || single:
		modes = modes[:1]
	case *modeFlag == "std":
		modes = modes[1:]
	}
	code := 0
	for _, std := range modes {
		stdMode = std
		if testing.Verbose() {
			fmt.Printf("=== proxy mode StdTransport=%v\n", std)
		}
		if c := m.Run(); c != 0 {
			code = c
		}
	}
	os.Exit(code)
}
