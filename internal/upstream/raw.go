package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/relay"
)

// The raw leg sends tools/call to a stdio server as bytes and takes the
// answers off the connection (lineTap.claim) before the SDK client reads
// them: no typed encode or decode, no dispatch through the SDK's
// connection. The SDK keeps the session (initialize, listing,
// notifications, server-to-client requests); the raw leg's ids are
// strings of its own ("tgr-N"), which the SDK (numbers) never uses, and
// its writes go through the same lock as the SDK's, a whole message each.

// ErrNoRaw says the server's connection has no raw leg (a legacy SSE
// server, a streamable HTTP one whose client handles server-to-client
// traffic, or one reached through Options.Transport), or that the server
// refused a raw call before taking it: use CallTool.
var ErrNoRaw = errors.New("upstream: no raw leg on this connection")

// rawIDPrefix starts the id of every raw call, with its opening quote.
var rawIDPrefix = []byte(`"tgr-`)

// rawReply is the answer to a raw call: a raw result, or a raw JSON-RPC
// error object, or a failure of the connection.
type rawReply struct {
	result, rpcErr []byte
	err            error
}

type rawLeg struct {
	w   *relay.LockedWriter
	seq atomic.Uint64

	// lastLine is when the reader last handed claim a line (unix nanos),
	// for the log of an unanswered call: a stale time says the
	// connection's reader stopped pulling, a fresh one that the server
	// never answered.
	lastLine atomic.Int64

	mu      sync.Mutex
	pending map[string]chan rawReply // by id token
	closed  error                    // set once the connection's reader failed
}

func newRawLeg(w io.Writer) *rawLeg {
	return &rawLeg{w: &relay.LockedWriter{W: w}, pending: map[string]chan rawReply{}}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// claim takes an answer to a raw call off the stream (called by the
// reader, with the line's bytes, valid only during the call).
func (r *rawLeg) claim(line []byte) bool {
	r.lastLine.Store(time.Now().UnixNano())
	if !bytes.Contains(line, rawIDPrefix) {
		return false
	}
	m, err := relay.Parse(line)
	if err != nil {
		// Not an envelope the lean path reads: find the id the slow way
		// and fail the call rather than let it wait for its timeout.
		var env struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(line, &env) != nil || !bytes.HasPrefix(env.ID, rawIDPrefix) {
			return false
		}
		return r.deliver(string(env.ID), rawReply{err: errors.New("the server's answer is not a JSON-RPC response toolgate can relay")})
	}
	if !bytes.HasPrefix(m.ID, rawIDPrefix) || m.Method != "" {
		return false
	}
	rep := rawReply{}
	switch {
	case m.Error != nil:
		rep.rpcErr = bytes.Clone(m.Error)
	case m.Result != nil:
		rep.result = bytes.Clone(m.Result)
	default:
		rep.err = errors.New("the server answered with neither a result nor an error")
	}
	return r.deliver(string(m.ID), rep)
}

func (r *rawLeg) deliver(id string, rep rawReply) bool {
	r.mu.Lock()
	ch, ok := r.pending[id]
	delete(r.pending, id)
	r.mu.Unlock()
	if ok {
		ch <- rep // buffered
	}
	return ok
}

// fail ends every raw call in flight: the connection's reader stopped.
func (r *rawLeg) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed != nil {
		return
	}
	r.closed = fmt.Errorf("%w: %v", mcp.ErrConnectionClosed, err)
	for id, ch := range r.pending {
		ch <- rawReply{err: r.closed}
		delete(r.pending, id)
	}
}

// timers are the call timeout's timers, reused: a context.WithTimeout
// per call cost a context, a timer and a cancel registration each time.
var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// call sends params (a tools/call params object) and waits for the answer,
// ctx or the timeout (errCallTimeout). A call that ends unanswered sends
// notifications/cancelled.
func (r *rawLeg) call(ctx context.Context, params []byte, timeout time.Duration) (rawReply, error) {
	bp := bufPool.Get().(*[]byte)
	buf := append((*bp)[:0], rawIDPrefix...)
	buf = strconv.AppendUint(buf, r.seq.Add(1), 10)
	buf = append(buf, '"')
	id := string(buf)
	ch := make(chan rawReply, 1)
	r.mu.Lock()
	if r.closed != nil {
		err := r.closed
		r.mu.Unlock()
		bufPool.Put(bp)
		return rawReply{}, err
	}
	r.pending[id] = ch
	r.mu.Unlock()

	buf = relay.AppendRequest(buf[:0], []byte(id), "tools/call", params)
	buf = append(buf, '\n')
	_, err := r.w.Write(buf)
	*bp = buf
	bufPool.Put(bp)
	if err != nil {
		r.mu.Lock()
		delete(r.pending, id)
		r.mu.Unlock()
		return rawReply{}, err
	}
	t := timers.Get().(*time.Timer)
	t.Reset(timeout)
	defer func() {
		t.Stop() // since Go 1.23, no stale tick is left to receive
		timers.Put(t)
	}()
	var reason error
	select {
	case rep := <-ch:
		return rep, rep.err
	case <-ctx.Done():
		err, reason = ctx.Err(), ctx.Err()
	case <-t.C:
		err, reason = errCallTimeout, context.DeadlineExceeded
	}
	if !r.forget(id) {
		return <-ch, nil // answered as it ended
	}
	var note []byte
	note = append(note, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`...)
	note = append(note, id...)
	note = append(note, `,"reason":"`...)
	note = append(note, reason.Error()...)
	note = append(note, "\"}}\n"...)
	_, _ = r.w.Write(note)
	return rawReply{}, err
}

// unanswered describes, for the log, the leg's state when a call timed
// out: how many calls are still waiting and how long ago the reader last
// delivered a line ("never" if it has not).
func (r *rawLeg) unanswered() (pending int, lastLine string) {
	r.mu.Lock()
	pending = len(r.pending)
	r.mu.Unlock()
	lastLine = "never"
	if t := r.lastLine.Load(); t != 0 {
		lastLine = time.Since(time.Unix(0, t)).Round(time.Millisecond).String() + " ago"
	}
	return pending, lastLine
}

// forget drops a pending call; false if its answer was already delivered.
func (r *rawLeg) forget(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.pending[id]
	delete(r.pending, id)
	return ok
}

// RawCallResult is the answer to RawCall: exactly one of Result (the raw
// result object) and Error (the raw JSON-RPC error object) is set.
type RawCallResult struct {
	Result, Error []byte
}

// RawCall calls a tool with params, a tools/call params object as bytes,
// on the raw leg of a stdio or streamable HTTP server (see httpLeg),
// starting the server if it is down.
// The answer is returned as the server sent it. It behaves as CallTool
// does: the server's call timeout, cancellation sent upstream, one retry
// on a connection that had broken before the call was sent, the same
// errors. A connection without a raw leg returns ErrNoRaw and nothing is
// sent.
func (s *Server) RawCall(ctx context.Context, params []byte) (RawCallResult, error) {
	for attempt := 0; ; attempt++ {
		c, err := s.acquire(ctx)
		if err != nil {
			return RawCallResult{}, err
		}
		if c.raw == nil && c.http == nil {
			s.release(c, false, false)
			return RawCallResult{}, ErrNoRaw
		}
		res, err := s.rawOnce(ctx, c, params)
		if errors.Is(err, errRawHTTPFallback) {
			s.release(c, false, false)
			return RawCallResult{}, ErrNoRaw
		}
		retry := false
		if err != nil && ctx.Err() == nil && connBroken(err) {
			s.lost(c, err)
			if attempt == 0 && errors.Is(err, mcp.ErrConnectionClosed) && !res.sent {
				retry = true
			} else {
				err = fmt.Errorf("server %q exited or closed the connection while the call was in flight (%v)", s.cfg.Name, err)
			}
		}
		s.release(c, true, err == nil)
		if !retry {
			return res.RawCallResult, err
		}
	}
}

type rawOutcome struct {
	RawCallResult
	sent bool
}

func (s *Server) rawOnce(ctx context.Context, c *conn, params []byte) (rawOutcome, error) {
	var rep rawReply
	var err error
	if c.raw != nil {
		rep, err = c.raw.call(ctx, params, s.callTimeout)
	} else {
		// The HTTP leg's request ends with its context: the timeout is
		// the context's cause.
		cctx, cancel := context.WithTimeoutCause(ctx, s.callTimeout, errCallTimeout)
		rep, err = c.http.call(cctx, params)
		if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), errCallTimeout) {
			err = errCallTimeout
		}
		cancel()
	}
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, errCallTimeout) {
			if c.raw != nil {
				pending, last := c.raw.unanswered()
				s.log.Warn("upstream: a raw tool call went unanswered until its timeout", "timeout", s.callTimeout, "calls_still_waiting", pending, "last_line_read", last)
			}
			return rawOutcome{sent: true}, fmt.Errorf("server %q did not answer within %s (its call_timeout); the call was cancelled upstream", s.cfg.Name, s.callTimeout)
		}
		if ctx.Err() != nil {
			return rawOutcome{sent: true}, fmt.Errorf("call cancelled by the caller; cancellation sent to server %q: %w", s.cfg.Name, ctx.Err())
		}
		// Refused before sending (the reader had stopped) or failed as
		// it was written or in flight.
		return rawOutcome{sent: !errors.Is(err, mcp.ErrConnectionClosed) || rep.err != nil}, err
	}
	return rawOutcome{RawCallResult: RawCallResult{Result: rep.result, Error: rep.rpcErr}, sent: true}, nil
}
