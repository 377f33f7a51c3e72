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
// of, goes on to the SDK server. Calls are served off the reading
// goroutine, so the reader goes on reading (cancellations above all): by
// an idle worker when there is one, else by a new one while fewer than
// MaxWorkers run, else by a goroutine of the call's own. Workers live as
// long as Ctx and keep their stacks between calls: a fresh goroutine per
// call grows its stack anew every time (runtime.newstack and copystack
// were several percent of the gateway's CPU per call).
type Frontend struct {
	Ctx context.Context
	// Peel says whether the relay serves a call to this tool now.
	Peel func(name string) bool
	// Serve answers a call; ctx ends if the client cancels it.
	Serve func(ctx context.Context, c Call) Answer
	Out   *LockedWriter
	// MaxWorkers bounds the long-lived workers (0: DefaultWorkers).
	MaxWorkers int

	mu       sync.Mutex
	inflight map[string]context.CancelFunc // by id token
	workers  int                           // long-lived workers started
	extra    int                           // goroutines of their own started (at MaxWorkers)
	calls    sync.WaitGroup                // calls being served
	wg       sync.WaitGroup                // workers and goroutines of their own
	jobs     chan job                      // unbuffered: a send succeeds only to an idle worker
}

// DefaultWorkers is Frontend.MaxWorkers when unset: more calls in flight
// at once than this each get a goroutine of their own.
const DefaultWorkers = 16

// job is a call handed to a worker.
type job struct {
	ctx    context.Context
	cancel context.CancelFunc
	c      Call
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
		// One copy of the line, the call's slices taken from it (the
		// line's bytes are the reader's, valid only during Claim).
		own := bytes.Clone(line)
		at := func(b []byte) []byte {
			if b == nil {
				return nil
			}
			// b is a slice of line (Parse only reslices), so its offset
			// in line is the difference of their capacities.
			i := cap(line) - cap(b)
			if i < 0 || i+len(b) > len(own) || !bytes.Equal(own[i:i+len(b)], b) {
				return bytes.Clone(b)
			}
			return own[i : i+len(b) : i+len(b)]
		}
		c := Call{ID: at(m.ID), Name: m.Name, Arguments: at(m.Arguments), Meta: at(m.Meta)}
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
		f.calls.Add(1)
		f.mu.Unlock()
		f.dispatch(job{ctx, cancel, c})
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

// dispatch hands j to an idle worker, or starts one, or (at MaxWorkers)
// serves it on a goroutine of its own; it never waits.
func (f *Frontend) dispatch(j job) {
	f.mu.Lock()
	if f.jobs == nil {
		f.jobs = make(chan job)
	}
	jobs := f.jobs
	f.mu.Unlock()
	select {
	case jobs <- j:
		return
	default:
	}
	max := f.MaxWorkers
	if max <= 0 {
		max = DefaultWorkers
	}
	f.mu.Lock()
	long := f.workers < max
	if long {
		f.workers++
	} else {
		f.extra++
	}
	f.wg.Add(1)
	f.mu.Unlock()
	if !long {
		go func() {
			defer f.wg.Done()
			f.serve(j)
		}()
		return
	}
	go f.work(j, jobs)
}

// work serves j, then the jobs handed to it, until Ctx ends.
func (f *Frontend) work(j job, jobs <-chan job) {
	defer f.wg.Done()
	done := f.Ctx.Done()
	for {
		f.serve(j)
		select {
		case j = <-jobs:
		case <-done:
			return
		}
	}
}

func (f *Frontend) serve(j job) {
	defer f.calls.Done()
	ctx, cancel, c := j.ctx, j.cancel, j.c
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

// Wait waits for the calls being served and, once Ctx has ended, for the
// workers to stop.
func (f *Frontend) Wait() {
	f.calls.Wait()
	if f.Ctx.Err() != nil {
		f.wg.Wait()
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}
