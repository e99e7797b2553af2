package h2server

import "time"

// SetGoAwayTimeout sets how long a connection stays open after its
// GOAWAY (one second outside tests), for the differential fuzz target,
// which waits for each connection to close.
func SetGoAwayTimeout(d time.Duration) { goAwayTimeout = d }
