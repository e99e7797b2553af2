package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"time"
)

// A container's log file holds, for each run, the marker line
// "==== <RFC3339Nano> starting <argv>" (startProcess) and then one entry
// per line of output, stamped when the process kubelet read it from the
// container's stdout/stderr:
//
//	<RFC3339Nano UTC> F <line without its newline>
//	<RFC3339Nano UTC> P <piece of a line longer than maxLogEntry>
//
// F ends a line; P says the line goes on in the next entry (as the CRI log
// format does). Lines that do not parse as entries (files written before
// lines were stamped) are served as they are, with their run's start time.

// maxLogEntry is the longest piece of a line one entry holds.
const maxLogEntry = 16 << 10

// stampLines copies r to w, one entry per line, stamped with now() when the
// line was read. Output that ends without a newline is a line of its own
// (it ended with the stream). It returns when r ends or fails, or w fails.
func stampLines(r io.Reader, w io.Writer, now func() time.Time) error {
	br := bufio.NewReaderSize(r, maxLogEntry)
	var buf []byte
	for {
		piece, err := br.ReadSlice('\n')
		if len(piece) > 0 {
			tag := byte('F')
			switch {
			case errors.Is(err, bufio.ErrBufferFull):
				tag = 'P'
			case piece[len(piece)-1] == '\n':
				piece = piece[:len(piece)-1]
			}
			buf = now().UTC().AppendFormat(buf[:0], time.RFC3339Nano)
			buf = append(buf, ' ', tag, ' ')
			buf = append(buf, piece...)
			buf = append(buf, '\n')
			if _, werr := w.Write(buf); werr != nil {
				return werr
			}
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return nil
		default:
			return err
		}
	}
}

// parseEntry parses one entry (with or without its newline): its time, its
// text, and whether the line goes on in the next entry.
func parseEntry(entry []byte) (at time.Time, text []byte, partial, ok bool) {
	ts, rest, found := bytes.Cut(entry, []byte(" "))
	if !found || len(rest) < 2 || rest[1] != ' ' || (rest[0] != 'F' && rest[0] != 'P') {
		return time.Time{}, nil, false, false
	}
	at, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return time.Time{}, nil, false, false
	}
	return at, bytes.TrimSuffix(rest[2:], []byte("\n")), rest[0] == 'P', true
}

// logLine is one line of a container's output as kubectl logs shows it.
type logLine struct {
	at   time.Time
	text []byte // with its newline, unless an unstamped file ends without one
}

// lineAssembler turns a run's entries into lines, joining a long line's
// pieces; the line's time is its first piece's.
type lineAssembler struct {
	legacy  time.Time // time of an unstamped line; zero: when it is read
	pending []byte    // pieces of a line not ended yet
	at      time.Time // the first pending piece's time
}

// add takes one entry; it returns a line once one is complete.
func (a *lineAssembler) add(entry []byte) (logLine, bool) {
	at, text, partial, ok := parseEntry(entry)
	if !ok {
		if a.legacy.IsZero() {
			return logLine{at: time.Now(), text: entry}, true
		}
		return logLine{at: a.legacy, text: entry}, true
	}
	if len(a.pending) == 0 {
		a.at = at
	}
	a.pending = append(a.pending, text...)
	if partial {
		return logLine{}, false
	}
	l := logLine{at: a.at, text: append(a.pending, '\n')}
	a.pending = nil
	return l, true
}

// flush returns the pieces of a line that never ended (its run did).
func (a *lineAssembler) flush() (logLine, bool) {
	if len(a.pending) == 0 {
		return logLine{}, false
	}
	l := logLine{at: a.at, text: append(a.pending, '\n')}
	a.pending = nil
	return l, true
}

// runLines returns the complete lines of a run's data; a line whose end is
// not in data stays pending in a.
func runLines(a *lineAssembler, data []byte) []logLine {
	var lines []logLine
	for _, entry := range splitLines(data) {
		if l, ok := a.add(entry); ok {
			lines = append(lines, l)
		}
	}
	return lines
}
