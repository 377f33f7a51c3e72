package console

import (
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/pipeline"
)

const (
	defaultRingSize = 1000
	// subscriberBuffer is how many events a live stream may fall behind
	// before it is dropped (its browser reconnects and catches up from
	// the ring with Last-Event-ID).
	subscriberBuffer = 256
	// maxSubscribers bounds the live streams open at once.
	maxSubscribers = 64
)

// Event is an event as the console shows and sends it: redacted.
type Event struct {
	ID        uint64         `json:"id"`
	Time      time.Time      `json:"time"`
	Type      string         `json:"type"`
	Session   string         `json:"session,omitempty"`
	Principal string         `json:"principal,omitempty"`
	Server    string         `json:"server,omitempty"`
	Tool      string         `json:"tool,omitempty"`
	Action    string         `json:"action,omitempty"`
	Reason    string         `json:"reason,omitempty"`
	Fields    map[string]any `json:"fields,omitempty"`
	Steps     []Step         `json:"steps,omitempty"`

	// trace is the call's trace, which goes on collecting steps after the
	// event (the middleware's result handling): a later read shows them all.
	trace *pipeline.Trace
}

// Step is one filter's verdict on a call.
type Step struct {
	Extension  string  `json:"extension"`
	Pipeline   string  `json:"pipeline"`
	Verdict    string  `json:"verdict"`
	Rule       string  `json:"rule,omitempty"`
	DurationMS float64 `json:"duration_ms"`
}

// Decision is what the activity filter calls an event's outcome: allow or
// block for a call decision, ok or error for a call's result, the action
// otherwise.
func (e *Event) Decision() string { return e.Action }

// IsCall reports whether the event belongs to a tool call.
func (e *Event) IsCall() bool {
	return e.Type == audit.ToolCallIntercepted || e.Type == audit.ToolCalled
}

// detectionTypes are the events the Detections page lists.
var detectionTypes = map[string]bool{
	audit.Detection: true, audit.CrossServerBlocked: true, audit.ServerNameSimilar: true,
	audit.OutputInspection: true, audit.ServerBinaryMismatch: true, audit.ToolChanged: true,
	audit.ServerLoadDenied: true,
}

// IsDetection reports whether the Detections page lists e: a detector's
// event, a refused network connection, or a call refused by a rule other
// than the discovery gate (rate limits, flow rules, pins, policies).
func (e *Event) IsDetection() bool {
	switch {
	case detectionTypes[e.Type]:
		return true
	case e.Type == audit.NetworkConnection:
		return e.Action != "allow"
	case e.Type == audit.ToolCallIntercepted && e.Action == "block":
		return e.Reason != "discovery_gate" && e.Reason != "unknown_tool" && e.Reason != "malformed_name"
	}
	return false
}

// convert redacts an observed event: every string, in the names, the
// reason and the fields, at any depth.
func (c *Console) convert(o gateway.Observed) Event {
	e := Event{
		Time: o.Time, Type: o.Type, Session: c.g.Redact(o.Session), Principal: c.g.Redact(o.Principal),
		Server: c.g.Redact(o.Server), Tool: c.g.Redact(o.Tool), Action: o.Action, Reason: c.g.Redact(o.Reason),
	}
	if len(o.Fields) > 0 {
		e.Fields, _ = c.redactAny(o.Fields).(map[string]any)
	}
	e.Steps = steps(o.Steps)
	e.trace = o.Trace
	return e
}

func steps(in []pipeline.Step) []Step {
	if len(in) == 0 {
		return nil
	}
	out := make([]Step, len(in))
	for i, s := range in {
		out[i] = Step{Extension: s.Extension, Pipeline: s.Pipeline, Verdict: s.Verdict, Rule: s.Rule,
			DurationMS: float64(s.Duration.Microseconds()) / 1000}
	}
	return out
}

// redactAny copies a JSON-like value with every string redacted; values
// of other types are rendered as text first (an extension may put any Go
// value in Fields).
func (c *Console) redactAny(v any) any {
	switch x := v.(type) {
	case nil, bool, float64, float32, int, int64, uint64, int32, uint32:
		return x
	case string:
		return c.g.Redact(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, v := range x {
			out[c.g.Redact(k)] = c.redactAny(v)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, v := range x {
			out[i] = c.redactAny(v)
		}
		return out
	case []string:
		out := make([]any, len(x))
		for i, v := range x {
			out[i] = c.g.Redact(v)
		}
		return out
	default:
		return c.redactAny(jsonish(x))
	}
}

// eventRing keeps the last events and fans new ones out to live streams.
type eventRing struct {
	mu     sync.Mutex
	buf    []Event
	next   int // index of the next write
	full   bool
	lastID uint64
	subs   map[chan Event]struct{}
}

func newEventRing(n int) *eventRing {
	return &eventRing{buf: make([]Event, n), subs: map[chan Event]struct{}{}}
}

func (r *eventRing) add(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastID++
	e.ID = r.lastID
	r.buf[r.next] = e
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
	for ch := range r.subs {
		select {
		case ch <- e:
		default:
			// Too far behind: dropped; its browser reconnects and
			// resumes from the ring.
			delete(r.subs, ch)
			close(ch)
		}
	}
}

// since returns the kept events with an ID above after, oldest first.
func (r *eventRing) since(after uint64) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sinceLocked(after)
}

func (r *eventRing) sinceLocked(after uint64) []Event {
	var out []Event
	n := r.next
	if r.full {
		n = len(r.buf)
	}
	start := 0
	if r.full {
		start = r.next
	}
	for i := range n {
		e := r.buf[(start+i)%len(r.buf)]
		if e.ID > after {
			if e.trace != nil {
				e.Steps = steps(e.trace.Steps())
			}
			out = append(out, e)
		}
	}
	return out
}

// subscribe returns the events after `after` kept so far and a channel of
// the ones to come, or ok false when too many streams are open.
func (r *eventRing) subscribe(after uint64) (backlog []Event, ch chan Event, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.subs) >= maxSubscribers {
		return nil, nil, false
	}
	ch = make(chan Event, subscriberBuffer)
	r.subs[ch] = struct{}{}
	return r.sinceLocked(after), ch, true
}

func (r *eventRing) unsubscribe(ch chan Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.subs[ch]; ok {
		delete(r.subs, ch)
		close(ch)
	}
}
