package relay

import (
	"bytes"
	"io"
	"sync"
)

// Lines passes newline-delimited JSON-RPC (a stdio connection) on to the
// SDK. Each complete line is shown to OnMessage, and Claim can take a line
// off the stream, so the SDK never reads it: an answer to a call the
// relay made, or a request the relay serves itself. It runs on the
// connection's reading goroutine, so it sees messages in wire order.
type Lines struct {
	R io.Reader
	// OnMessage (nil: none) is shown each line the reader is handed.
	OnMessage func([]byte)
	// Claim (nil: none) may take a line off the stream: true, and the
	// reader never sees it.
	Claim func([]byte) bool
	// OnEOF (nil: none) is called once when R fails.
	OnEOF func(error)
	// Max bounds a line (0: no bound); a longer one passes through
	// unshown.
	Max int

	rbuf     []byte
	carry    []byte // the start of a line split across reads
	skipping bool   // inside a line over max: passed through as it comes
	first    []byte // the line completed from carry, ready for the reader
	out      []byte // the rest ready for the reader (within rbuf)
	err      error
}

func (t *Lines) Read(p []byte) (int, error) {
	for len(t.first) == 0 && len(t.out) == 0 {
		if t.err != nil {
			return 0, t.err
		}
		if t.rbuf == nil {
			t.rbuf = make([]byte, 32<<10)
		}
		n, err := t.R.Read(t.rbuf)
		t.scan(t.rbuf[:n])
		if err != nil {
			t.err = err
			if len(t.carry) > 0 {
				// An unterminated last line: the SDK reports it.
				t.first = append(t.first, t.carry...)
				t.carry = t.carry[:0]
			}
			if t.OnEOF != nil {
				t.OnEOF(err)
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
func (t *Lines) scan(b []byte) {
	w, i := 0, 0 // write and read positions in b
	for i < len(b) {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			// An incomplete line: keep it for the next read.
			if t.skipping || (t.Max > 0 && len(t.carry)+len(b)-i > t.Max) {
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
func (t *Lines) keep(line []byte) bool {
	msg := bytes.TrimRight(line, "\r\n")
	if len(bytes.TrimSpace(msg)) == 0 || (t.Max > 0 && len(msg) > t.Max) {
		return true
	}
	if t.Claim != nil && t.Claim(msg) {
		return false
	}
	if t.OnMessage != nil {
		t.OnMessage(msg)
	}
	return true
}

// LockedWriter makes whole messages written by the SDK and by the relay
// that never interleave: each Write is one message.
type LockedWriter struct {
	mu sync.Mutex
	W  io.Writer
}

func (l *LockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.W.Write(p)
}
