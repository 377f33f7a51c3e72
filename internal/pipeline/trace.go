package pipeline

import (
	"context"
	"sync"
	"time"
)

// Step is one filter's part in an operation: which extension, in which
// pipeline (search, call, response), what it decided and how long it took.
// For a search filter, Hid names the tools it removed from the ranking.
type Step struct {
	Extension string        `json:"extension"`
	Pipeline  string        `json:"pipeline"`
	Verdict   string        `json:"verdict"` // pass, deny, error
	Rule      string        `json:"rule,omitempty"`
	Duration  time.Duration `json:"duration_ns"`
	Hid       []string      `json:"hid,omitempty"`
}

// Trace collects the steps of the operations run with its context. It is
// safe for concurrent use; a nil *Trace records nothing.
type Trace struct {
	mu    sync.Mutex
	steps []Step
}

// maxSteps bounds a trace: an operation runs each filter once per
// pipeline, so this is reached only by a context reused across many
// operations, whose later steps are then dropped.
const maxSteps = 256

type traceKey struct{}

// WithTrace returns ctx carrying a new trace, or ctx as it is when it
// already carries one (a call's steps stay in one trace).
func WithTrace(ctx context.Context) context.Context {
	if TraceFrom(ctx) != nil {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, &Trace{})
}

// TraceFrom returns the trace in ctx, or nil.
func TraceFrom(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}

// begin records a middleware's step as it passes the call on (s says
// "pass"): its final verdict and time are known only when the rest of the
// chain has returned, and set then, so steps stay in the order the
// middleware was entered and a reader during the call sees it passed. It
// returns -1 when the trace is full.
func (t *Trace) begin(s Step) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.steps) >= maxSteps {
		return -1
	}
	t.steps = append(t.steps, s)
	return len(t.steps) - 1
}

// set fills the step begin reserved.
func (t *Trace) set(i int, s Step) {
	if i < 0 {
		return
	}
	t.mu.Lock()
	t.steps[i] = s
	t.mu.Unlock()
}

func (t *Trace) add(s Step) {
	if t == nil {
		return
	}
	t.mu.Lock()
	if len(t.steps) < maxSteps {
		t.steps = append(t.steps, s)
	}
	t.mu.Unlock()
}

// Steps returns a copy of the steps recorded so far.
func (t *Trace) Steps() []Step {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Step(nil), t.steps...)
}

// verdict names a filter's outcome for a trace.
func verdict(err error) (string, string) {
	if err == nil {
		return "pass", ""
	}
	if d, ok := asDenial(err); ok {
		return "deny", d
	}
	return "error", ""
}
