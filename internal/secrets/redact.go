package secrets

import (
	"context"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// Mask replaces a secret value wherever one is found.
const Mask = "[REDACTED]"

// Which values are masked, and how. Every value that came from a credential
// source (.env, the tokens file, a server's env or headers, URL userinfo or
// query) is a secret whatever its name; the only question is how to find it
// in text without garbling everything else:
//
//   - wordLen characters or more, or shorter but mixing letters and digits
//     as tokens do ("zq9x"): masked wherever it occurs, even inside a longer
//     word (a key pasted into a URL, a token in a header dump, or a hostile
//     server gluing it to other letters);
//   - shorter and all letters or all digits (minLen to wordLen-1, "blue",
//     "8080"): masked only as a whole token, where neither neighbour is a
//     letter or digit: "blue" is masked in "team=blue" and "blue." but not
//     in "blueprint";
//   - never: values shorter than minLen, numbers of fewer than four digits,
//     and the words of ordinary settings (true, off, debug, production...),
//     listed in plainWords. Masking "1" or "true" everywhere would hide
//     nothing worth hiding and make every result unreadable.
const (
	minLen  = 3
	wordLen = 8
)

// plainWords are setting values that are never secrets (compared
// case-insensitively).
var plainWords = map[string]bool{
	"true": true, "false": true, "yes": true, "no": true, "on": true, "off": true, "null": true, "none": true, "nil": true,
	"enable": true, "enabled": true, "disable": true, "disabled": true,
	"trace": true, "debug": true, "info": true, "warn": true, "warning": true, "error": true, "fatal": true,
	"dev": true, "prod": true, "test": true, "local": true, "localhost": true, "staging": true, "production": true, "development": true,
	"json": true, "text": true, "stdio": true, "http": true, "https": true,
}

// mixed reports whether v has both a letter and a digit.
func mixed(v string) bool {
	return strings.ContainsFunc(v, unicode.IsLetter) && strings.ContainsFunc(v, unicode.IsDigit)
}

// Masked reports whether value would be masked by a Redactor knowing it,
// per the rules above.
func Masked(value string) bool {
	v := strings.TrimSpace(value)
	if len(v) < minLen || v == Mask || plainWords[strings.ToLower(v)] {
		return false
	}
	if len(v) < 4 && strings.Trim(v, "0123456789") == "" {
		return false
	}
	return true
}

// Redactor replaces known secret values in text. It is safe for concurrent
// use; Add may be called at any time (e.g. when a rotated token is read).
type Redactor struct {
	mu     sync.Mutex
	values map[string]bool
	m      atomic.Pointer[matcher]
}

// matcher is an immutable snapshot of what a Redactor knows.
type matcher struct {
	long  *strings.Replacer // values matched anywhere, longest first
	short []string          // values matched as whole tokens, longest first
	// probes are every value in raw and JSON-escaped form: a text or an
	// encoding containing none of them needs no further work. byPrefix
	// indexes them by their first three bytes (every value has three), and
	// prefixes is a bitset of hashes of those, so the check is one pass
	// over the text whatever the number of secrets.
	probes   []string
	byPrefix map[uint32][]string
	prefixes [1 << 16 / 8]byte
}

func trigram[T string | []byte](s T, i int) uint32 {
	return uint32(s[i])<<16 | uint32(s[i+1])<<8 | uint32(s[i+2])
}

func bit(k uint32) uint32 { return (k * 2654435761) >> 16 }

func (m *matcher) addProbe(p string) {
	m.probes = append(m.probes, p)
	k := trigram(p, 0)
	m.byPrefix[k] = append(m.byPrefix[k], p)
	h := bit(k)
	m.prefixes[h/8] |= 1 << (h % 8)
}

// scan reports whether text contains a probe.
func scan[T string | []byte](m *matcher, text T) bool {
	for i := 0; i+2 < len(text); i++ {
		k := trigram(text, i)
		if h := bit(k); m.prefixes[h/8]&(1<<(h%8)) == 0 {
			continue
		}
	probes:
		for _, p := range m.byPrefix[k] {
			if len(text)-i < len(p) {
				continue
			}
			for j := 3; j < len(p); j++ {
				if text[i+j] != p[j] {
					continue probes
				}
			}
			return true
		}
	}
	return false
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
		if !Masked(v) || r.values[v] {
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
	sort.Slice(vs, func(i, j int) bool {
		if len(vs[i]) != len(vs[j]) {
			return len(vs[i]) > len(vs[j])
		}
		return vs[i] < vs[j]
	})
	m := &matcher{byPrefix: map[uint32][]string{}}
	var pairs []string
	for _, v := range vs {
		if len(v) >= wordLen || mixed(v) {
			pairs = append(pairs, v, Mask)
		} else {
			m.short = append(m.short, v)
		}
		m.addProbe(v)
		if e := jsonEscaped(v); e != v {
			m.addProbe(e)
		}
	}
	if len(pairs) > 0 {
		m.long = strings.NewReplacer(pairs...)
	}
	r.m.Store(m)
}

// Empty reports whether no secret is known yet.
func (r *Redactor) Empty() bool { return r == nil || r.m.Load() == nil }

// String masks every known secret in s.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	m := r.m.Load()
	if m == nil || !m.mayContain(s) {
		return s
	}
	if m.long != nil {
		s = m.long.Replace(s)
	}
	for _, v := range m.short {
		s = replaceToken(s, v)
	}
	return s
}

// Contains reports whether s holds a known secret.
func (r *Redactor) Contains(s string) bool { return r.String(s) != s }

func (m *matcher) mayContain(s string) bool { return scan(m, s) }

// replaceToken masks the occurrences of v in s that are whole tokens.
func replaceToken(s, v string) string {
	var b strings.Builder
	changed := false
	rest := s
	for {
		i := strings.Index(rest, v)
		if i < 0 {
			break
		}
		end := i + len(v)
		if wordEdge(s[:len(s)-len(rest)+i], true) && wordEdge(rest[end:], false) {
			changed = true
			b.WriteString(rest[:i])
			b.WriteString(Mask)
		} else {
			b.WriteString(rest[:end])
		}
		rest = rest[end:]
	}
	if !changed {
		return s
	}
	b.WriteString(rest)
	return b.String()
}

// wordEdge reports whether the text next to a match (before it when
// before is true) does not continue a word.
func wordEdge(side string, before bool) bool {
	if side == "" {
		return true
	}
	var c rune
	if before {
		c, _ = utf8.DecodeLastRuneInString(side)
	} else {
		c, _ = utf8.DecodeRuneInString(side)
	}
	return !unicode.IsLetter(c) && !unicode.IsDigit(c)
}

// Value masks every known secret in the strings of a JSON-like value
// (maps, slices, strings), returning a copy when something changed.
func (r *Redactor) Value(v any) any {
	out, _ := r.value(v)
	return out
}

// Handler wraps a slog.Handler so that no known secret reaches the log, in
// the message or in any attribute, and no URL carries credentials.
func (r *Redactor) Handler(h slog.Handler) slog.Handler { return &redactHandler{h: h, r: r} }

type redactHandler struct {
	h slog.Handler
	r *Redactor
}

func (h *redactHandler) text(s string) string { return StripURLs(h.r.String(s)) }

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.text(rec.Message), rec.PC)
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
		return slog.String(a.Key, h.text(v.String()))
	case slog.KindGroup:
		as := v.Group()
		out := make([]any, len(as))
		for i, g := range as {
			out[i] = h.attr(g)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.text(err.Error()))
		}
		return slog.String(a.Key, h.text(v.String()))
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
