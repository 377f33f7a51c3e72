package upstream

//lint:file-ignore SA1019 the leg must know whether the client handles sampling and logging, which SEP-2577 deprecates with a long window.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/relay"
)

// The raw leg of a streamable HTTP server: tools/call is POSTed as bytes on
// the SDK client's session (its Mcp-Session-Id and protocol version), with
// the connection's own http.Client (so its headers, token, origin check
// and response limits), and the answer is read off the JSON body or the
// SSE stream as bytes. The SDK client keeps the session; this leg only
// sends calls on it.
//
// A call's SSE stream may carry other messages before the answer. The leg
// is only used where the SDK client would do nothing with them but note a
// changed tool list (no handlers of server-to-client traffic: meta mode),
// and a server-to-client request on the stream is answered as that client
// would (see other).

// errRawHTTPFallback says the server refused the raw POST before taking
// the call (an error status): the SDK's leg sends it again and handles
// the refusal as it does (an expired session, say).
var errRawHTTPFallback = errors.New("upstream: the server refused the raw call; use the SDK's leg")

// httpLeg sends raw tools/call on a streamable HTTP session.
type httpLeg struct {
	client  *http.Client
	url     string
	session string // Mcp-Session-Id ("" if the server gave none)
	version string // the negotiated protocol version
	seq     atomic.Uint64
	// onToolsChanged is the SDK client's handler of a changed tool list.
	onToolsChanged func()
	// limit bounds one answer (the server's max_response_bytes).
	limit int64
}

// newHTTPLeg returns the raw leg of sess, or nil where there is none: a
// session on the 2026-07-28 revision (whose per-request metadata the SDK
// adds), or a client that handles server-to-client traffic a call may
// carry (handlers set).
func newHTTPLeg(hc *http.Client, url string, sess *mcp.ClientSession, copts *mcp.ClientOptions, onToolsChanged func(), limit int64) *httpLeg {
	ir := sess.InitializeResult()
	if ir == nil || ir.ProtocolVersion >= "2026-07-28" {
		return nil
	}
	if copts.CreateMessageHandler != nil || copts.CreateMessageWithToolsHandler != nil || copts.ElicitationHandler != nil ||
		copts.LoggingMessageHandler != nil || copts.ProgressNotificationHandler != nil || copts.ResourceUpdatedHandler != nil ||
		copts.PromptListChangedHandler != nil || copts.ResourceListChangedHandler != nil || copts.ElicitationCompleteHandler != nil {
		return nil
	}
	if limit <= 0 {
		limit = 1 << 30 // the transport's own limit applies
	}
	return &httpLeg{client: hc, url: url, session: sess.ID(), version: ir.ProtocolVersion, onToolsChanged: onToolsChanged, limit: limit}
}

// call POSTs a tools/call with params and reads its answer. A context
// that ends first sends notifications/cancelled, as the SDK client does.
func (l *httpLeg) call(ctx context.Context, params []byte) (rawReply, error) {
	bp := bufPool.Get().(*[]byte)
	id := append((*bp)[:0], rawIDPrefix...)
	id = strconv.AppendUint(id, l.seq.Add(1), 10)
	id = append(id, '"')
	idTok := string(id)
	body := relay.AppendRequest(id[:0], []byte(idTok), "tools/call", params)
	defer func() { *bp = body; bufPool.Put(bp) }()

	// The request has its own context so that reading the rest of the
	// stream after the answer (drain) can be cut short.
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	resp, err := l.post(rctx, body)
	if err != nil {
		if ctx.Err() != nil {
			l.cancel(idTok, ctx)
			return rawReply{}, ctx.Err()
		}
		if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
			// Nothing was sent: the call may be retried on a new
			// connection.
			return rawReply{}, fmt.Errorf("%w: %v", mcp.ErrConnectionClosed, err)
		}
		return rawReply{err: err}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return rawReply{}, errRawHTTPFallback
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var rep rawReply
	switch mt {
	case "application/json":
		b, err := io.ReadAll(io.LimitReader(resp.Body, l.limit+1))
		switch {
		case err != nil:
			rep.err = err
		case int64(len(b)) > l.limit:
			rep.err = fmt.Errorf("the answer is larger than the gateway's %d-byte limit (max_response_bytes)", l.limit)
		default:
			rep = l.answer(idTok, b)
		}
	case "text/event-stream":
		rep = l.readStream(ctx, idTok, resp.Body)
		if rep.err == nil {
			drain(resp.Body, stop)
		}
	default:
		rep.err = fmt.Errorf("the server answered a tool call as %q, neither JSON nor an event stream", mt)
	}
	if ctx.Err() != nil && rep.result == nil && rep.rpcErr == nil {
		l.cancel(idTok, ctx)
		return rawReply{}, ctx.Err()
	}
	return rep, rep.err
}

func (l *httpLeg) post(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if l.session != "" {
		req.Header.Set("Mcp-Session-Id", l.session)
	}
	req.Header.Set("Mcp-Protocol-Version", l.version)
	return l.client.Do(req)
}

// After a call's answer the server ends its stream (the spec says it
// SHOULD), usually at once. Reading that end lets the connection go back
// to the pool: a body closed before its end closes the connection, and the
// next call would dial (and, over TLS, handshake) a new one. The wait is
// short and bounded, so a server that keeps the stream open costs the
// connection, as before, not the call's time.
const drainBytes = 64 << 10

// drainWait bounds the wait (a variable so that tests of the connection's
// reuse do not depend on the machine's load).
var drainWait = 2 * time.Millisecond

// drain reads the rest of body, for at most drainWait and drainBytes;
// stop ends the request when the wait is over.
func drain(body io.Reader, stop context.CancelFunc) {
	t := time.AfterFunc(drainWait, stop)
	_, _ = io.CopyN(io.Discard, body, drainBytes)
	t.Stop()
}

// answer reads one JSON-RPC message that must be the response to id.
func (l *httpLeg) answer(id string, msg []byte) rawReply {
	m, err := relay.Parse(msg)
	switch {
	case err != nil || m.Method != "" || string(m.ID) != id:
		return rawReply{err: errors.New("the server's answer is not a JSON-RPC response toolgate can relay")}
	case m.Error != nil:
		return rawReply{rpcErr: bytes.Clone(m.Error)}
	case m.Result != nil:
		return rawReply{result: bytes.Clone(m.Result)}
	}
	return rawReply{err: errors.New("the server answered with neither a result nor an error")}
}

// readStream reads a call's SSE stream up to the response to id.
func (l *httpLeg) readStream(ctx context.Context, id string, r io.Reader) rawReply {
	sb, db := bufPool.Get().(*[]byte), bufPool.Get().(*[]byte)
	defer bufPool.Put(sb)
	defer bufPool.Put(db)
	sc := bufio.NewScanner(r)
	sc.Buffer((*sb)[:0], int(min(l.limit+64, 1<<30)))
	data := (*db)[:0]
	started := false // data holds an event's data lines
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) > 0 {
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				d = bytes.TrimPrefix(d, []byte(" "))
				if started {
					data = append(data, '\n')
				}
				data, started = append(data, d...), true
			}
			continue
		}
		// The end of an event.
		msg := data
		data, started = data[:0], false
		if cap(msg) > cap(*db) {
			*db = msg[:0] // keep the grown buffer
		}
		if len(msg) == 0 {
			continue // a priming event, a comment
		}
		if !bytes.Contains(msg, []byte(id)) {
			l.other(ctx, msg)
			continue
		}
		if rep := l.answer(id, msg); rep.err == nil || !bytes.Contains(msg, []byte(`"method"`)) {
			return rep
		}
		l.other(ctx, msg)
	}
	if err := sc.Err(); err != nil {
		return rawReply{err: fmt.Errorf("reading the answer: %w", err)}
	}
	return rawReply{err: fmt.Errorf("%w: the server ended the call's stream without answering", mcp.ErrConnectionClosed)}
}

// other handles a message on a call's stream that is not its answer, as
// the SDK client configured without handlers would: a changed tool list
// is noted, ping and roots/list are answered (no roots), any other request
// "method not found", anything else is dropped.
func (l *httpLeg) other(ctx context.Context, msg []byte) {
	m, err := relay.Parse(msg)
	if err != nil {
		return
	}
	switch {
	case m.Method == "notifications/tools/list_changed" && m.ID == nil:
		if l.onToolsChanged != nil {
			l.onToolsChanged()
		}
	case m.Method != "" && m.ID != nil:
		var b []byte
		switch m.Method {
		case "ping":
			b = relay.AppendResponse(b, m.ID, []byte(`{}`), nil)
		case "roots/list":
			// The SDK client declares roots and, with none given, lists
			// none.
			b = relay.AppendResponse(b, m.ID, []byte(`{"roots":[]}`), nil)
		default:
			b = relay.AppendResponse(b, m.ID, nil, []byte(`{"code":-32601,"message":"method not found"}`))
		}
		if resp, err := l.post(context.WithoutCancel(ctx), b); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
		}
	}
}

// cancel tells the server that the caller gave up on the call id.
func (l *httpLeg) cancel(id string, ctx context.Context) {
	note := make([]byte, 0, 128)
	note = append(note, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`...)
	note = append(note, id...)
	note = append(note, `,"reason":`...)
	note = strconv.AppendQuote(note, ctx.Err().Error())
	note = append(note, "}}"...)
	cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer stop()
	if resp, err := l.post(cctx, note); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
	}
}
