package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestServePipelinedKeepAlive(t *testing.T) {
	client, server := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- serve(server, response(100)) }()
	client.SetDeadline(time.Now().Add(5 * time.Second))
	reqs := "GET / HTTP/1.1\r\nHost: a\r\n\r\n" +
		"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello" +
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
	go io.WriteString(client, reqs)
	br := bufio.NewReader(client)
	for i := 0; i < 3; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || len(body) != 100 || resp.ContentLength != 100 {
			t.Errorf("response %d: status %d, %d bytes", i, resp.StatusCode, len(body))
		}
	}
	if err := <-done; err != nil {
		t.Errorf("serve after Connection: close = %v, want nil", err)
	}
}

func TestReadRequestRejectsBadInput(t *testing.T) {
	for _, in := range []string{
		"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
		"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a",
	} {
		if _, err := readRequest(bufio.NewReader(strings.NewReader(in))); err == nil {
			t.Errorf("readRequest(%q) succeeded", in)
		}
	}
	keep, err := readRequest(bufio.NewReader(strings.NewReader("GET / HTTP/1.0\r\n\r\n")))
	if err != nil || keep {
		t.Errorf("HTTP/1.0 request: keepAlive %v, err %v; want false, nil", keep, err)
	}
}
