package state

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/extension"
)

// CallPrefetcher is implemented by call filters whose decision is one
// script in the shared state. Before a call's filters run, the pipeline
// asks each for its script and sends them all to Redis in one round trip;
// each filter then finds its answer with Prefetched instead of making its
// own. A filter that queues nothing decides as usual.
//
// The scripts all run before any filter decides, so each records the call
// as its own decision would (a rate-limit count, a flow read) even when
// another filter then refuses the call: stricter, never laxer.
type CallPrefetcher interface {
	PrefetchCall(ctx context.Context, req *extension.CallRequest, batch *CallBatch)
}

// CallBatch gathers one call's scripts.
type CallBatch struct {
	b       *Backend
	entries []*batchEntry
}

type batchEntry struct {
	owner  any
	note   any
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
}

// Queue adds owner's script run; note is handed back with its outcome
// (what the owner decided the script's arguments from). Scripts of
// another backend than the batch's first are not queued (owner then runs
// its own).
func (cb *CallBatch) Queue(owner, note any, b *Backend, s *redis.Script, keys []string, args ...any) {
	if cb.b == nil {
		cb.b = b
	}
	if cb.b != b {
		return
	}
	cb.entries = append(cb.entries, &batchEntry{owner: owner, note: note, script: s, keys: keys, args: args})
}

// Len is the number of scripts queued.
func (cb *CallBatch) Len() int { return len(cb.entries) }

// Exec sends every queued script in one pipeline (by hash; a Redis that
// lost its script cache, after a restart, gets the scripts' text in a
// second round trip). Each script's outcome, error included, is what
// Prefetched returns to its owner.
func (cb *CallBatch) Exec(ctx context.Context) {
	if len(cb.entries) == 0 {
		return
	}
	run := func(byHash bool, es []*batchEntry) {
		p := cb.b.Client.Pipeline()
		for _, e := range es {
			if byHash {
				e.cmd = e.script.EvalSha(ctx, p, e.keys, e.args...)
			} else {
				e.cmd = e.script.Eval(ctx, p, e.keys, e.args...)
			}
		}
		_, _ = p.Exec(ctx) // each command keeps its own error
	}
	run(true, cb.entries)
	var missing []*batchEntry
	for _, e := range cb.entries {
		if err := e.cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			missing = append(missing, e)
		}
	}
	if len(missing) > 0 {
		run(false, missing)
	}
}

type batchKey struct{}

// WithBatch returns ctx carrying an executed batch.
func WithBatch(ctx context.Context, cb *CallBatch) context.Context {
	return context.WithValue(ctx, batchKey{}, cb)
}

// Prefetched returns owner's script outcome, and the note it queued it
// with, from the batch ctx carries.
func Prefetched(ctx context.Context, owner any) (*redis.Cmd, any, bool) {
	cb, _ := ctx.Value(batchKey{}).(*CallBatch)
	if cb == nil {
		return nil, nil, false
	}
	for _, e := range cb.entries {
		if e.owner == owner && e.cmd != nil {
			return e.cmd, e.note, true
		}
	}
	return nil, nil, false
}
