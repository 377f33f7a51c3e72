// Package audit is toolgate's record: an append-only JSON-lines log of
// every decision and detection, each record chained to the one before by a
// SHA-256 hash so that an edited, removed or reordered record is caught by
// Verify. Append returns only after the record is written to the file and
// synced, so an acknowledged event survives kill -9 (and, with sync on, a
// power cut).
package audit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Event types.
const (
	ToolSeen             = "tool_seen"
	ToolChanged          = "tool_changed"
	ToolCalled           = "tool_called"
	ToolCallIntercepted  = "tool_call_intercepted"
	CrossServerBlocked   = "cross_server_blocked"
	Detection            = "detection"
	ServerNameSimilar    = "server_name_similarity"
	OutputInspection     = "output_inspection"
	ServerBinaryMismatch = "server_binary_mismatch"
	ServerLoaded         = "server_loaded"
	ServerLoadDenied     = "server_load_denied"
	Search               = "search"
)

// Event is one record. Fields holds what is specific to the type (hashes,
// rule, severity, detections...). Argument values never go in an event
// unless the operator asked for them; ArgsHash identifies them instead.
type Event struct {
	Seq     uint64         `json:"seq"`
	Time    time.Time      `json:"time"`
	Type    string         `json:"type"`
	Session string         `json:"session,omitempty"`
	Server  string         `json:"server,omitempty"`
	Tool    string         `json:"tool,omitempty"`
	Action  string         `json:"action,omitempty"`
	Reason  string         `json:"reason,omitempty"`
	Fields  map[string]any `json:"fields,omitempty"`
	Prev    string         `json:"prev"`
	Hash    string         `json:"hash"`
}

// genesis is the Prev of the first record.
const genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// Log is an open audit log. It is safe for concurrent use.
type Log struct {
	path   string
	f      *os.File
	sync   bool
	redact func(string) string

	mu   sync.Mutex // orders records: seq, prev, write
	seq  uint64
	prev string
	gen  atomic.Uint64 // records written

	syncMu sync.Mutex // one fsync at a time; later writers ride on it
	synced uint64
}

// Options configure Open.
type Options struct {
	// NoSync skips fsync: records still reach the kernel before Append
	// returns (enough for kill -9), but not the disk.
	NoSync bool
	// Redact is applied to every string of an event before it is written.
	Redact func(string) string
}

// Open opens (creating if needed) the log at path and continues its chain.
// A log whose last record does not parse is an error: appending after a
// torn record would hide it.
func Open(path string, opts Options) (*Log, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit: %v", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: %v", err)
	}
	l := &Log{path: path, f: f, sync: !opts.NoSync, redact: opts.Redact, prev: genesis}
	last, err := lastLine(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("audit %s: %v", path, err)
	}
	if last != nil {
		var e Event
		if err := json.Unmarshal(last, &e); err != nil || e.Hash == "" {
			f.Close()
			return nil, fmt.Errorf("audit %s: the last record is damaged (%q...); run `toolgate audit verify` and move the file aside", path, truncate(string(last), 40))
		}
		l.seq, l.prev = e.Seq, e.Hash
	}
	return l, nil
}

// Path is the log file's path.
func (l *Log) Path() string { return l.path }

// Append writes e as the next record, filling Seq, Time (if zero), Prev and
// Hash, and returns once it is durable.
func (l *Log) Append(e Event) error {
	if l.redact != nil {
		e.Session, e.Reason = l.redact(e.Session), l.redact(e.Reason)
		e.Fields = redactFields(e.Fields, l.redact)
	}
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	l.mu.Lock()
	e.Seq = l.seq + 1
	e.Prev = l.prev
	e.Hash = ""
	body, err := json.Marshal(e)
	if err != nil {
		l.mu.Unlock()
		return fmt.Errorf("audit: encode %s event: %v", e.Type, err)
	}
	// Hash is the last field and empty in body: splice the hash in rather
	// than encoding the event a second time.
	e.Hash = hashOf(body)
	const empty = `"hash":""}`
	if !bytes.HasSuffix(body, []byte(empty)) {
		l.mu.Unlock()
		return fmt.Errorf("audit: encoded %s event does not end with its hash field", e.Type)
	}
	line := make([]byte, 0, len(body)+len(e.Hash)+1)
	line = append(line, body[:len(body)-len(empty)]...)
	line = append(line, `"hash":"`...)
	line = append(line, e.Hash...)
	line = append(line, "\"}\n"...)
	if _, err := l.f.Write(line); err != nil {
		l.mu.Unlock()
		return fmt.Errorf("audit: write: %v", err)
	}
	l.seq, l.prev = e.Seq, e.Hash
	gen := l.gen.Add(1)
	l.mu.Unlock()
	if !l.sync {
		return nil
	}
	return l.syncTo(gen)
}

// syncTo makes sure every record up to gen is on disk. Concurrent callers
// share one fsync: whoever syncs covers everything written before it.
func (l *Log) syncTo(gen uint64) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.synced >= gen {
		return nil
	}
	target := l.gen.Load()
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("audit: sync: %v", err)
	}
	l.synced = target
	return nil
}

// Close closes the file.
func (l *Log) Close() error { return l.f.Close() }

func hashOf(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

func redactFields(m map[string]any, r func(string) string) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = redactValue(v, r)
	}
	return out
}

func redactValue(v any, r func(string) string) any {
	switch x := v.(type) {
	case string:
		return r(x)
	case []string:
		out := make([]string, len(x))
		for i, s := range x {
			out[i] = r(s)
		}
		return out
	case map[string]any:
		return redactFields(x, r)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = redactValue(e, r)
		}
		return out
	}
	return v
}

// lastLine returns the last non-empty line of f, reading from the end.
func lastLine(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size == 0 {
		return nil, nil
	}
	const chunk = 64 * 1024
	var buf []byte
	for off := size; off > 0; {
		n := int64(chunk)
		if off < n {
			n = off
		}
		off -= n
		b := make([]byte, n)
		if _, err := f.ReadAt(b, off); err != nil && err != io.EOF {
			return nil, err
		}
		buf = append(b, buf...)
		trimmed := bytes.TrimRight(buf, "\n")
		if i := bytes.LastIndexByte(trimmed, '\n'); i >= 0 {
			return trimmed[i+1:], nil
		}
		if off == 0 && len(trimmed) > 0 {
			return trimmed, nil
		}
	}
	return nil, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// BrokenError reports the first record that breaks the chain.
type BrokenError struct {
	Line   int
	Seq    uint64
	Reason string
}

func (e *BrokenError) Error() string {
	return fmt.Sprintf("audit chain broken at line %d (seq %d): %s", e.Line, e.Seq, e.Reason)
}

// Verify reads the log at path and checks every record's hash and link. It
// returns the number of valid records and, if the chain breaks, a
// *BrokenError naming the first bad record.
func Verify(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	lastHash := ""
	err = scan(f, func(line int, raw []byte, e *Event, perr error) error {
		if perr != nil {
			return &BrokenError{Line: line, Reason: "not a valid record: " + perr.Error()}
		}
		want := genesis
		if n > 0 {
			want = lastHash
		}
		if e.Prev != want {
			return &BrokenError{Line: line, Seq: e.Seq, Reason: "prev does not match the hash of the record before (a record was removed, inserted or reordered)"}
		}
		if e.Seq != uint64(n+1) {
			return &BrokenError{Line: line, Seq: e.Seq, Reason: fmt.Sprintf("seq is %d, want %d", e.Seq, n+1)}
		}
		h := e.Hash
		e.Hash = ""
		body, _ := json.Marshal(e)
		if hashOf(body) != h {
			return &BrokenError{Line: line, Seq: e.Seq, Reason: "hash does not match the record's content (it was edited)"}
		}
		lastHash = h
		n++
		return nil
	})
	return n, err
}

// Read calls fn for every record in order, stopping at fn's first error.
func Read(path string, fn func(*Event) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return scan(f, func(line int, _ []byte, e *Event, perr error) error {
		if perr != nil {
			return fmt.Errorf("audit %s line %d: %v", path, line, perr)
		}
		return fn(e)
	})
}

func scan(r io.Reader, fn func(line int, raw []byte, e *Event, err error) error) error {
	br := bufio.NewReaderSize(r, 64*1024)
	line := 0
	for {
		raw, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(raw)) > 0 {
			line++
			var e Event
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			perr := dec.Decode(&e)
			if ferr := fn(line, raw, &e, perr); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
