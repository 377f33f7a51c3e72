package secrets

import (
	"context"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Mask replaces a secret value wherever one is found.
const Mask = "[REDACTED]"

// minSecretLen is the shortest value treated as a secret: redacting "1" or
// "on" everywhere would mangle output without protecting anything.
const minSecretLen = 6

// Redactor replaces known secret values in text. It is safe for concurrent
// use; Add may be called at any time (e.g. when a rotated token is read).
type Redactor struct {
	mu     sync.Mutex
	values map[string]bool
	r      atomic.Pointer[strings.Replacer]
}

// NewRedactor returns a Redactor knowing values.
func NewRedactor(values ...string) *Redactor {
	r := &Redactor{values: map[string]bool{}}
	r.Add(values...)
	return r
}

// Add registers secret values.
func (r *Redactor) Add(values ...string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	added := false
	for _, v := range values {
		v = strings.TrimSpace(v)
		if len(v) < minSecretLen || r.values[v] {
			continue
		}
		r.values[v] = true
		added = true
	}
	if !added {
		return
	}
	// Longest first, so a secret containing another is masked whole.
	vs := make([]string, 0, len(r.values))
	for v := range r.values {
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return len(vs[i]) > len(vs[j]) })
	pairs := make([]string, 0, 2*len(vs))
	for _, v := range vs {
		pairs = append(pairs, v, Mask)
	}
	r.r.Store(strings.NewReplacer(pairs...))
}

// Empty reports whether no secret is known yet.
func (r *Redactor) Empty() bool { return r == nil || r.r.Load() == nil }

// String masks every known secret in s.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	rep := r.r.Load()
	if rep == nil {
		return s
	}
	return rep.Replace(s)
}

// Value masks every known secret in the strings of a JSON-like value
// (maps, slices, strings), returning a copy when something changed.
func (r *Redactor) Value(v any) any {
	if r == nil || r.r.Load() == nil {
		return v
	}
	switch x := v.(type) {
	case string:
		return r.String(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[r.String(k)] = r.Value(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = r.Value(e)
		}
		return out
	}
	return v
}

// Handler wraps a slog.Handler so that no known secret reaches the log, in
// the message or in any attribute.
func (r *Redactor) Handler(h slog.Handler) slog.Handler { return &redactHandler{h: h, r: r} }

type redactHandler struct {
	h slog.Handler
	r *Redactor
}

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *redactHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		as := v.Group()
		out := make([]any, len(as))
		for i, g := range as {
			out[i] = h.attr(g)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.r.String(err.Error()))
		}
		return slog.String(a.Key, h.r.String(v.String()))
	}
	return slog.Attr{Key: a.Key, Value: v}
}

func (h *redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = h.attr(a)
	}
	return &redactHandler{h: h.h.WithAttrs(out), r: h.r}
}

func (h *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{h: h.h.WithGroup(name), r: h.r}
}
