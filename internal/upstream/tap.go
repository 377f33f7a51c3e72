package upstream

import (
	"bytes"
)

// The tap shows the gateway every message a server sends, as bytes, on the
// goroutine that reads the connection and before the SDK client sees it.
// The SDK hands notifications (progress, logging) and server-to-client
// requests to a handler goroutine while its reader completes calls at once,
// so a handler can run after the result that followed the notification on
// the wire. What the tap saw is the wire order: the gateway counts what a
// call's result must wait for (see Options.OnMessage).

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
