package llmproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func readAll(t testing.TB, in string, max int) ([]event, error) {
	r := newSSEReader(strings.NewReader(in), max)
	var out []event
	for {
		e, err := r.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, event{raw: clone(e.raw), name: e.name, data: clone(e.data)})
	}
}

func TestSSEReader(t *testing.T) {
	in := "event: a\ndata: {\"x\":1}\n\n" + // plain
		"event: b\r\ndata:no-space\r\n\r\n" + // CRLF, no space after the colon
		": a comment\ndata: one\ndata: two\n\n" + // comment and multi-line data
		"\n" + // a stray blank line
		"data: " + strings.Repeat("y", 100) + "\n\n" + // longer than the bufio buffer? no, but exercises copy
		"data: last" // no terminator
	evs, err := readAll(t, in, 1024)
	if err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	for _, e := range evs {
		raw.Write(e.raw)
	}
	if raw.String() != in {
		t.Fatalf("raw bytes not preserved:\n%q\nwant\n%q", raw.String(), in)
	}
	want := []struct{ name, data string }{{"a", `{"x":1}`}, {"b", "no-space"}, {"", "one\ntwo"}, {"", ""}, {"", strings.Repeat("y", 100)}, {"", "last"}}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d: %q", len(evs), len(want), evs)
	}
	for i, w := range want {
		if evs[i].name != w.name || string(evs[i].data) != w.data {
			t.Errorf("event %d = %q %q, want %q %q", i, evs[i].name, evs[i].data, w.name, w.data)
		}
	}
}

// TestSSEReaderBound: a line or an event past max_event_bytes is an error,
// not an unbounded buffer, even when it is longer than bufio's buffer.
func TestSSEReaderBound(t *testing.T) {
	for _, in := range []string{
		"data: " + strings.Repeat("z", 100<<10) + "\n\n",
		strings.Repeat("data: zzzzzzzzzz\n", 10<<10) + "\n",
	} {
		_, err := readAll(t, in, 64<<10)
		if !errors.Is(err, errEventTooLarge) {
			t.Errorf("%d-byte event: err %v, want errEventTooLarge", len(in), err)
		}
	}
	// Just under the bound passes, across several bufio fills.
	in := "data: " + strings.Repeat("z", 60<<10) + "\n\n"
	evs, err := readAll(t, in, 64<<10)
	if err != nil || len(evs) != 1 || len(evs[0].data) != 60<<10 {
		t.Fatalf("60 KiB event: %v, %d events", err, len(evs))
	}
}

// FuzzSSEReader: any input is read without panicking, every byte comes
// back in the raw events, and no event exceeds the bound.
func FuzzSSEReader(f *testing.F) {
	f.Add("event: a\ndata: b\n\n")
	f.Add("data: x\r\ndata: y\r\n\r\n\n\ndata")
	f.Add(":\n\nevent:\ndata:\n")
	f.Fuzz(func(t *testing.T, in string) {
		const max = 256
		evs, err := readAll(t, in, max)
		var raw bytes.Buffer
		for _, e := range evs {
			if len(e.raw) > max {
				t.Fatalf("event of %d bytes past the bound", len(e.raw))
			}
			raw.Write(e.raw)
		}
		if err == nil && raw.String() != in {
			t.Fatalf("raw bytes not preserved: %q vs %q", raw.String(), in)
		}
		if err != nil && !strings.HasPrefix(in, raw.String()) {
			t.Fatalf("events before the error are not a prefix of the input")
		}
	})
}

// flushWriter reports each flush with what had been written by then.
type flushWriter struct {
	discardWriter
	buf     bytes.Buffer
	flushed chan string
}

func (f *flushWriter) Write(b []byte) (int, error) { return f.buf.Write(b) }
func (f *flushWriter) Flush()                      { f.flushed <- f.buf.String() }

// TestStreamFlushesBeforeWaiting: an event is sent before the proxy waits
// for the provider, even when part of the next event has already arrived
// (the flush is only skipped for a whole event already there).
func TestStreamFlushesBeforeWaiting(t *testing.T) {
	pr, pw := io.Pipe()
	w := &flushWriter{discardWriter: discardWriter{h: http.Header{}}, flushed: make(chan string, 16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		blockSendEmail().stream(context.Background(), w, pr, "anthropic", apiMessages, &requestInfo{})
	}()
	a := "event: ping\ndata: {\"type\":\"ping\"}\n\n"
	b := "event: ping\ndata: {\"type\":\"ping\"}\n\n"
	go pw.Write([]byte(a + b + b[:10])) // two whole events and part of a third
	select {
	case got := <-w.flushed:
		if got != a+b {
			t.Errorf("first flush sent %q, want both whole events", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the events that arrived were not flushed while the proxy waited for the rest")
	}
	pw.Close()
	<-done
}
