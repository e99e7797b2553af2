package h2server_test

// differentialSeeds are FuzzDifferential's seed corpus, in clientStream's
// encoding: an op byte, then the op's bytes (see client.step).
func differentialSeeds() [][]byte {
	const (
		newStream = 0 // stream selector: a new stream
		current   = 1 // the stream last opened
		conn      = 2 // stream 0
	)
	// get: HEADERS on a new stream, method GET, scheme https, path (an
	// index in paths), authority example.com, and n fields (each a name
	// index in fieldNames, then a value index or a length and bytes).
	get := func(flags byte, path byte, n byte, fields ...byte) []byte {
		b := []byte{opHeaders, newStream, flags, n}
		if flags&hFieldsFirst != 0 {
			b = append(b, 0, 1, 'a') // x-echo: a
		}
		b = append(b, 0, 0, path, 0)
		return append(b, fields...)
	}
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	post := cat(
		[]byte{opHeaders, newStream, 0, 1, 1, 0, 1, 0, 0, 3, 'h', 'e', 'y'}, // POST /echo, x-echo: hey
		[]byte{opData, current, 0, 5, 'h', 'e', 'l', 'l', 'o'},
		[]byte{opData, current, 1, 3, 'a', 'b', 'c'}, // END_STREAM
	)
	return [][]byte{
		{}, // the preface, SETTINGS and the sentinel PING only
		get(hEndStream, 0, 0),
		get(hEndStream, 2, 0),        // /s/404
		get(hEndStream, 3, 1, 15, 0), // /s/204 with an empty field name
		post,
		cat(post, []byte{opData, current, 1, 2, 'n', 'o'}),                                                       // DATA after END_STREAM
		cat(get(0, 1, 0), []byte{opData, current, 2, 4, 3, 'b', 'o', 'd', 'y'}, []byte{opRSTStream, current, 8}), // padded DATA, then CANCEL
		{opResetBurst, 40}, // rapid reset
		{opResetBurst, 255, opResetBurst, 255},
		{opContFlood, 100},
		get(hEndStream, 0, 1, 7, 0), // X-Upper: an uppercase field name
		get(hEndStream, 0, 1, 3, 0), // connection: close
		get(hEndStream, 0, 1, 12),   // x-long: over MaxHeaderBytes
		cat(get(hEndStream|hFieldsFirst, 0, 0), get(hEndStream, 0, 0)),                                   // a field before the pseudo-headers
		cat(get(0, 1, 0), get(0, 1, 0), get(0, 1, 0), get(0, 1, 0), get(0, 1, 0), get(hEndStream, 1, 0)), // over MaxConcurrentStreams
		cat(get(hEndStream|hSplit, 1, 1, 0, 4, 'e', 'c', 'h', 'o'), []byte{opPing, 0, 1, 2, 3, 4, 5, 6, 7, 8}),
		cat(get(hEndStream|hOpenBlock, 0, 0), []byte{opContinuation, current, 1}), // CONTINUATION with END_HEADERS
		cat(get(hEndStream|hOpenBlock, 0, 0), []byte{opPing, 0}),                  // PING inside a header block
		{opWindowUpdate, conn, 0, 0, 0, 0},                                        // zero increment on the connection
		cat(get(0, 1, 0), []byte{opWindowUpdate, current, 0x7f, 0xff, 0xff, 0xff, opWindowUpdate, current, 0x7f, 0xff, 0xff, 0xff}),
		{opSettings, 2, 4, 0, 0, 0, 0}, // SETTINGS_INITIAL_WINDOW_SIZE 0
		{opSettings, 2, 5, 0, 0, 0, 1}, // SETTINGS_MAX_FRAME_SIZE 1
		{opPriority, current, 2, 16},   // PRIORITY on itself
		cat(get(hEndStream, 0, 0), []byte{opGoAway, 0, 0, 0, 1, 0}),
		{opRaw, 4, 0, conn, 5, 0, 0, 0, 0, 0},                                                                                      // SETTINGS of 5 bytes
		{opRaw, 0x10, 0, conn, 4, 0, 0, 0, 1},                                                                                      // PRIORITY_UPDATE
		{opRaw, 1, 4, 3, 1, 200},                                                                                                   // padded HEADERS, padding over the payload
		{opOversize, 0, newStream},                                                                                                 // DATA frame over MaxReadFrameSize
		cat(get(hEndStream, 0, 0), []byte{opHeaders, 3}),                                                                           // HEADERS on an even stream
		cat(get(0, 0, 1, 4, 0), []byte{opData, current, 1, 4, 'a', 'b', 'c', 'd'}),                                                 // expect: 100-continue
		cat(get(0, 1, 1, 1, 1), []byte{opData, current, 1, 4, 'a', 'b', 'c', 'd'}),                                                 // content-length 3, 4 bytes sent
		cat(get(0, 1, 0), []byte{opData, current, 0, 1, 'x', opHeaders, current, hEndStream, 1, 9, 4, 11, 5, 5, 3, 'x', 'y', 'z'}), // request trailers
	}
}
