package upstream

import (
	"bytes"
	"io"
)

// The tap shows the gateway every message a server sends, as bytes, on the
// goroutine that reads the connection and before the SDK client sees it.
// The SDK hands notifications (progress, logging) and server-to-client
// requests to a handler goroutine while its reader completes calls at once,
// so a handler can run after the result that followed the notification on
// the wire. What the tap saw is the wire order: the gateway counts what a
// call's result must wait for (see Options.OnMessage).

// lineTap passes a stdio server's output on to the SDK a line at a time.
// It shows each complete line to onMessage, and lets claim take a line
// off the stream (the raw leg's answers, see raw.go), so the SDK never
// reads it. A line longer than max passes through unshown (the SDK
// refuses it).
type lineTap struct {
	r         io.Reader
	onMessage func([]byte) // nil: none
	claim     func([]byte) bool
	onEOF     func(error) // called once when r fails
	max       int

	rbuf     []byte
	carry    []byte // the start of a line split across reads
	skipping bool   // inside a line over max: passed through as it comes
	first    []byte // the line completed from carry, ready for the reader
	out      []byte // the rest ready for the reader (within rbuf)
	err      error
}

func (t *lineTap) Read(p []byte) (int, error) {
	for len(t.first) == 0 && len(t.out) == 0 {
		if t.err != nil {
			return 0, t.err
		}
		if t.rbuf == nil {
			t.rbuf = make([]byte, 32<<10)
		}
		n, err := t.r.Read(t.rbuf)
		t.scan(t.rbuf[:n])
		if err != nil {
			t.err = err
			if len(t.carry) > 0 {
				// An unterminated last line: the SDK reports it.
				t.first = append(t.first, t.carry...)
				t.carry = t.carry[:0]
			}
			if t.onEOF != nil {
				t.onEOF(err)
			}
		}
	}
	if len(t.first) > 0 {
		n := copy(p, t.first)
		t.first = t.first[n:]
		return n, nil
	}
	n := copy(p, t.out)
	t.out = t.out[n:]
	return n, nil
}

// scan splits b (the read buffer) into lines: the one that completes
// carry goes to first; the others are compacted in place into out.
func (t *lineTap) scan(b []byte) {
	w, i := 0, 0 // write and read positions in b
	for i < len(b) {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			// An incomplete line: keep it for the next read.
			if t.skipping || (t.max > 0 && len(t.carry)+len(b)-i > t.max) {
				// Over the limit: let the SDK see (and refuse) it as it comes.
				if !t.skipping && len(t.carry) > 0 {
					// No newline in this read (else carry would be
					// empty): the carry goes first.
					t.first = append(t.first, t.carry...)
					t.carry = t.carry[:0]
				}
				t.skipping = true
				w += copy(b[w:], b[i:])
			} else {
				t.carry = append(t.carry, b[i:]...)
			}
			break
		}
		line := b[i : i+j+1] // with its newline
		i += j + 1
		if t.skipping {
			t.skipping = false
			w += copy(b[w:], line)
			continue
		}
		if len(t.carry) > 0 {
			t.carry = append(t.carry, line...)
			if t.keep(t.carry) {
				t.first = append(t.first[:0], t.carry...)
			}
			t.carry = t.carry[:0]
			if cap(t.carry) > 64<<10 {
				t.carry = nil // a large message passed; do not hold its buffer
			}
			continue
		}
		if t.keep(line) {
			w += copy(b[w:], line)
		}
	}
	t.out = b[:w]
}

// keep shows a complete line (with its newline) and says whether the SDK
// gets it.
func (t *lineTap) keep(line []byte) bool {
	msg := bytes.TrimRight(line, "\r\n")
	if len(bytes.TrimSpace(msg)) == 0 || (t.max > 0 && len(msg) > t.max) {
		return true
	}
	if t.claim != nil && t.claim(msg) {
		return false
	}
	if t.onMessage != nil {
		t.onMessage(msg)
	}
	return true
}

// sseData returns the data of one SSE event (its data lines joined by
// newlines), or nil for an event without data.
func sseData(ev []byte) []byte {
	var out []byte
	n := 0
	for line := range bytes.Lines(ev) {
		d, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		d = bytes.TrimPrefix(d, []byte(" "))
		d = bytes.TrimRight(d, "\r\n")
		if n == 0 {
			out = d // the common case, one data line: no copy
		} else {
			if n == 1 {
				out = append([]byte(nil), out...)
			}
			out = append(append(out, '\n'), d...)
		}
		n++
	}
	return out
}
