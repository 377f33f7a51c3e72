package upstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"sync"
)

// The response limit of HTTP servers.
//
// The SDK reads an application/json response whole and caps only SSE
// events, so one answer of hundreds of megabytes would be held in memory
// (several times, while it is decoded and relayed). The gateway's transport
// caps both, before the SDK sees them: a response body over the limit, or
// an SSE event over it, is replaced by a JSON-RPC error answering the
// request it was for, naming the server and the limit. The session stays
// usable, and the call fails at once instead of waiting for its timeout.

// lineLimit is the stdio line limit for the SDK.
func (s *Server) lineLimit() int { return int(s.maxResponse) }

// sdkEventLimit is the SDK's own SSE event cap: a backstop above the
// gateway's, which counts field names and line ends too and so always
// fires first.
func (s *Server) sdkEventLimit() int { return int(s.maxResponse) + 4096 }

// tooLargeError is the JSON-RPC error that replaces an oversized message.
func (t *headerTransport) tooLargeError(id json.RawMessage) []byte {
	msg := fmt.Sprintf("server %q sent a message larger than the gateway's %d-byte limit (max_response_bytes); it was discarded", t.server, t.limit)
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      id,
		"error":   map[string]any{"code": -32603, "message": msg},
	})
	return b
}

func (t *headerTransport) logTooLarge(what string, answered bool) {
	if t.probe != nil {
		t.probe.sawTooLarge()
	}
	if t.log != nil {
		t.log.Warn("upstream message over the size limit discarded", "what", what, "limit_bytes", t.limit, "answered_with_error", answered)
	}
}

// requestID returns the id of the JSON-RPC request r carries, or nil for
// anything else (a GET, a notification, a response).
func requestID(r *http.Request) json.RawMessage {
	if r.Method != http.MethodPost || r.GetBody == nil {
		return nil
	}
	body, err := r.GetBody()
	if err != nil {
		return nil
	}
	defer body.Close()
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.NewDecoder(body).Decode(&m); err != nil || m.Method == "" || !validID(m.ID) {
		return nil
	}
	return m.ID
}

// validID reports whether raw is a JSON-RPC id: a number or a string.
func validID(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	if raw[0] == '"' {
		var s string
		return json.Unmarshal(raw, &s) == nil
	}
	_, err := strconv.ParseFloat(string(raw), 64)
	return err == nil
}

// limitResponse applies the response limit to resp, the answer to r.
func (t *headerTransport) limitResponse(r *http.Request, id json.RawMessage, resp *http.Response) (*http.Response, error) {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if t.limit <= 0 && (t.onMessage == nil || mt != "text/event-stream") {
		return resp, nil
	}
	if mt == "text/event-stream" {
		br := sseReaders.Get().(*bufio.Reader)
		br.Reset(resp.Body)
		resp.Body = &eventLimiter{src: resp.Body, br: br, t: t, callID: id, atLineStart: true}
		resp.ContentLength = -1
		return resp, nil
	}
	// Any other body the SDK reads whole: a JSON answer, an error page.
	if resp.ContentLength >= 0 && resp.ContentLength <= t.limit {
		return resp, nil // net/http stops at Content-Length
	}
	var body []byte
	if resp.ContentLength < 0 {
		var err error
		body, err = io.ReadAll(io.LimitReader(resp.Body, t.limit+1))
		if err != nil {
			resp.Body.Close()
			return nil, err
		}
	}
	resp.Body.Close()
	if int64(len(body)) <= t.limit && resp.ContentLength < 0 {
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return resp, nil
	}
	// Over the limit.
	if resp.StatusCode < 200 || resp.StatusCode > 299 || id == nil {
		t.logTooLarge("response body", false)
		if id == nil {
			return nil, fmt.Errorf("server %q sent a response larger than the gateway's %d-byte limit (max_response_bytes)", t.server, t.limit)
		}
		// An error status says enough; its body is dropped.
		resp.Body, resp.ContentLength = http.NoBody, 0
		resp.Header = resp.Header.Clone()
		resp.Header.Del("Content-Length")
		return resp, nil
	}
	t.logTooLarge("response body", true)
	msg := t.tooLargeError(id)
	resp.Header = resp.Header.Clone()
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Del("Content-Length")
	resp.Header.Del("Content-Encoding")
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(msg)), int64(len(msg))
	return resp, nil
}

// eventLimiter passes an SSE stream through an event at a time, holding at
// most one event (up to the limit). An event over the limit is dropped and
// replaced by an error event answering its request: on the stream of a POST,
// the request it answered is known, and the stream ends there; on a
// standalone stream (the streamable GET, or legacy SSE, where every answer
// arrives), the event is read to its end without keeping it and its id is
// taken from its first or last bytes. An oversized event whose id cannot be
// found (a notification) is dropped with a log line.
type eventLimiter struct {
	src io.ReadCloser
	// mu is held by Read: Close returns br to sseReaders only once no
	// Read uses it (closing src first ends a Read blocked on it).
	mu     sync.Mutex
	br     *bufio.Reader // nil once released
	t      *headerTransport
	callID json.RawMessage

	out         []byte // ready for the reader
	ev          []byte // the current event, while it fits
	over        bool   // skipping an oversized event
	head, tail  []byte // its first and last bytes, for its id
	atLineStart bool
	err         error // the source's error, returned once out is drained
}

const (
	idHeadBytes = 4096
	idTailBytes = 512
)

// sseReaders are the buffers of SSE streams (one a call over HTTP), kept
// from stream to stream.
var sseReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}

var errClosedBody = errors.New("http: read on closed response body")

func (l *eventLimiter) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.out) == 0 {
		if l.err != nil {
			l.release()
			return 0, l.err
		}
		if l.br == nil {
			return 0, errClosedBody
		}
		l.step()
	}
	n := copy(p, l.out)
	l.out = l.out[n:]
	return n, nil
}

// step reads one line fragment and moves the state along.
func (l *eventLimiter) step() {
	frag, err := l.br.ReadSlice('\n')
	blank := l.atLineStart && (string(frag) == "\n" || string(frag) == "\r\n")
	l.atLineStart = len(frag) > 0 && frag[len(frag)-1] == '\n'
	switch {
	case l.over:
		l.tail = append(l.tail, frag...)
		if len(l.tail) > idTailBytes {
			l.tail = append(l.tail[:0], l.tail[len(l.tail)-idTailBytes:]...)
		}
		if blank {
			l.endOversized()
		}
	case l.t.limit > 0 && int64(len(l.ev)+len(frag)) > l.t.limit:
		l.over = true
		l.head = append([]byte(nil), l.ev[:min(len(l.ev), idHeadBytes)]...)
		if len(l.head) < idHeadBytes {
			l.head = append(l.head, frag[:min(len(frag), idHeadBytes-len(l.head))]...)
		}
		l.tail = append(l.tail[:0], frag[max(0, len(frag)-idTailBytes):]...)
		l.ev = nil
		if l.callID != nil {
			// The answer to the POST's request is over the limit: answer
			// it with the error and stop reading.
			l.t.logTooLarge("sse event", true)
			l.out = sseEvent(l.t.tooLargeError(l.callID))
			l.err = io.EOF
			l.src.Close()
			return
		}
		if blank {
			l.endOversized()
		}
	default:
		l.ev = append(l.ev, frag...)
		if blank {
			l.out, l.ev = l.ev, nil
			l.tap()
		}
	}
	if err == bufio.ErrBufferFull {
		return
	}
	if err != nil {
		if !l.over && len(l.ev) > 0 {
			l.out, l.ev = l.ev, nil
			l.tap()
		}
		l.err = err
	}
}

// tap shows the event about to be handed to the SDK to the gateway.
func (l *eventLimiter) tap() {
	if l.t.onMessage != nil {
		if d := sseData(l.out); len(d) > 0 {
			l.t.onMessage(d)
		}
	}
}

// endOversized answers the skipped event's request, if its id is known.
func (l *eventLimiter) endOversized() {
	id := headID(l.head)
	if id == nil {
		id = tailID(l.tail)
	}
	l.over, l.head, l.tail = false, nil, nil
	l.t.logTooLarge("sse event", id != nil)
	if id != nil {
		l.out = sseEvent(l.t.tooLargeError(id))
	}
}

func (l *eventLimiter) Close() error {
	err := l.src.Close()
	l.mu.Lock()
	l.release()
	l.mu.Unlock()
	return err
}

// release returns the stream's buffer to sseReaders; l.mu is held.
func (l *eventLimiter) release() {
	if l.br != nil {
		l.br.Reset(nil)
		sseReaders.Put(l.br)
		l.br = nil
	}
}

func sseEvent(data []byte) []byte {
	return append(append([]byte("event: message\ndata: "), data...), "\n\n"...)
}

// headID finds the top-level "id" of a JSON-RPC response from the start of
// the SSE event carrying it (its first data line, possibly cut short).
func headID(head []byte) json.RawMessage {
	var data []byte
	for line := range bytes.Lines(head) {
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			data = bytes.TrimPrefix(d, []byte(" "))
			break
		}
	}
	if data == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil // cut short inside a value before "id" came
		}
		if key == "id" {
			if validID(v) {
				return v
			}
			return nil
		}
	}
	return nil
}

// tailRE matches an "id" that is the last member of the outermost object,
// at the very end of the event: how the TypeScript SDK writes a response
// ({"result":...,"jsonrpc":"2.0","id":5}).
var tailRE = regexp.MustCompile(`"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.){0,256}")\s*\}\s*$`)

func tailID(tail []byte) json.RawMessage {
	m := tailRE.FindSubmatch(bytes.TrimRight(tail, "\r\n"))
	if m == nil || !validID(m[1]) {
		return nil
	}
	return json.RawMessage(m[1])
}
