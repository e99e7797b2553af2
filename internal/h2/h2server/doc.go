// Package h2server is the HTTP/2 server sluice's traffic listeners run:
// a fork of golang.org/x/net/http2's server (see NOTICE for the version
// and what changed), so that it writes response headers and flushes on
// its own goroutine over internal/h2's batching connection instead of
// starting a goroutine for each. internal/h2 installs it in net/http.
package h2server
