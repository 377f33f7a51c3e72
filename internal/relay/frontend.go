package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Call is a tools/call the Frontend took off a client's input. Its slices
// are its own.
type Call struct {
	ID        []byte // the id's JSON token
	Name      string
	Arguments []byte // nil when absent
	Meta      []byte // params._meta, nil when absent
}

// Answer is what serving a Call gives: a raw result, or a JSON-RPC error.
type Answer struct {
	Result []byte
	Error  *jsonrpc.Error
}

// Frontend takes tools/call requests off a stdio client's input (as the
// Claim of a Lines) and answers them itself, writing the response to Out;
// everything else, and any call Peel declines or the parser is not sure
// of, goes on to the SDK server. Each call is served on a goroutine of
// its own, as the SDK would, so the reader goes on reading (cancellations
// above all).
type Frontend struct {
	Ctx context.Context
	// Peel says whether the relay serves a call to this tool now.
	Peel func(name string) bool
	// Serve answers a call; ctx ends if the client cancels it.
	Serve func(ctx context.Context, c Call) Answer
	Out   *LockedWriter

	mu       sync.Mutex
	inflight map[string]context.CancelFunc // by id token
	wg       sync.WaitGroup
}

var (
	toolsCall = []byte(`"tools/call"`)
	cancelled = []byte(`"notifications/cancelled"`)
)

// Claim is the Lines hook: it takes the calls it serves, and the
// cancellations of those.
func (f *Frontend) Claim(line []byte) bool {
	call := bytes.Contains(line, toolsCall)
	if !call && !bytes.Contains(line, cancelled) {
		return false
	}
	m, err := Parse(line)
	if err != nil {
		return false
	}
	switch {
	case m.Method == "tools/call" && m.ID != nil:
		if !f.Peel(m.Name) {
			return false
		}
		c := Call{ID: bytes.Clone(m.ID), Name: m.Name, Arguments: bytes.Clone(m.Arguments), Meta: bytes.Clone(m.Meta)}
		ctx, cancel := context.WithCancel(f.Ctx)
		f.mu.Lock()
		if f.inflight == nil {
			f.inflight = map[string]context.CancelFunc{}
		}
		if _, dup := f.inflight[string(c.ID)]; dup {
			f.mu.Unlock()
			cancel()
			return false // the SDK reports a reused id
		}
		f.inflight[string(c.ID)] = cancel
		f.wg.Add(1)
		f.mu.Unlock()
		go f.serve(ctx, cancel, c)
		return true
	case m.Method == "notifications/cancelled" && m.ID == nil:
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &p) != nil {
			return false
		}
		f.mu.Lock()
		cancel, ok := f.inflight[string(p.RequestID)]
		f.mu.Unlock()
		if ok {
			cancel()
		}
		return ok
	}
	return false
}

func (f *Frontend) serve(ctx context.Context, cancel context.CancelFunc, c Call) {
	defer f.wg.Done()
	ans := f.Serve(ctx, c)
	f.mu.Lock()
	delete(f.inflight, string(c.ID))
	f.mu.Unlock()
	cancel()
	bp := bufPool.Get().(*[]byte)
	buf := AppendAnswer((*bp)[:0], c.ID, ans)
	buf = append(buf, '\n')
	_, _ = f.Out.Write(buf) // a broken output ends the session through the SDK's own writes and reads
	*bp = buf
	bufPool.Put(bp)
}

// AppendAnswer appends the JSON-RPC response that answers the call with
// id (its JSON token) to buf.
func AppendAnswer(buf, id []byte, ans Answer) []byte {
	var errObj []byte
	if ans.Error != nil {
		var err error
		if errObj, err = json.Marshal(ans.Error); err != nil {
			errObj = []byte(`{"code":-32603,"message":"the answer could not be encoded"}`)
		}
	} else if ans.Result == nil {
		ans.Result = []byte(`{}`)
	}
	return AppendResponse(buf, id, ans.Result, errObj)
}

// Wait waits for the calls being served.
func (f *Frontend) Wait() { f.wg.Wait() }

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}
