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

// lineTap passes a stdio server's output through unchanged and calls
// onMessage with each complete line. A line longer than max is not shown
// (the SDK refuses it anyway).
type lineTap struct {
	r         io.Reader
	onMessage func([]byte)
	max       int
	carry     []byte // the start of a line split across reads
	skipping  bool   // inside a line over max
}

func (t *lineTap) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.scan(p[:n])
	return n, err
}

func (t *lineTap) scan(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if !t.skipping {
				if t.max > 0 && len(t.carry)+len(b) > t.max {
					t.carry, t.skipping = t.carry[:0], true
				} else {
					t.carry = append(t.carry, b...)
				}
			}
			return
		}
		line := b[:i]
		b = b[i+1:]
		if t.skipping {
			t.skipping = false
			continue
		}
		if len(t.carry) > 0 {
			t.carry = append(t.carry, line...)
			line = t.carry
		}
		if len(bytes.TrimSpace(line)) > 0 && (t.max <= 0 || len(line) <= t.max) {
			t.onMessage(line)
		}
		t.carry = t.carry[:0]
		if cap(t.carry) > 64<<10 {
			t.carry = nil // a large message passed; do not hold its buffer
		}
	}
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
