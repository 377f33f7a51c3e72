package secrets

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// jsonEscaped is v as it appears inside a JSON string written by
// encoding/json (which escapes <, >, & and control characters).
func jsonEscaped(v string) string {
	b, err := json.Marshal(v)
	if err != nil || len(b) < 2 {
		return v
	}
	return string(b[1 : len(b)-1])
}

// value masks the strings of a decoded JSON value, object keys included
// (a hostile server can put a secret in a _meta or schema key), except the
// field names of the protocol itself: a .env value such as "name" or
// "type" would otherwise break every message, and a word every message
// carries discloses nothing. Numbers whose digits hold a secret become 0:
// a number cannot carry the mask.
func (r *Redactor) value(v any) (any, bool) {
	if r == nil {
		return v, false
	}
	m := r.m.Load()
	if m == nil {
		return v, false
	}
	switch x := v.(type) {
	case string:
		s := r.String(x)
		return s, s != x
	case json.Number:
		if r.String(string(x)) != string(x) {
			return json.Number("0"), true
		}
		return x, false
	case map[string]any:
		changed := false
		out := make(map[string]any, len(x))
		// In key order, so which of two keys masked alike keeps the plain
		// mask is the same every time.
		for _, k := range slices.Sorted(maps.Keys(x)) {
			e := x[k]
			nk := k
			if !protocolKeys[k] {
				nk = r.String(k)
			}
			ne, c := r.value(e)
			if _, dup := out[nk]; dup {
				nk = nk + "#" + fmt.Sprint(len(out))
			}
			out[nk] = ne
			changed = changed || c || nk != k
		}
		if !changed {
			return v, false
		}
		return out, true
	case []any:
		changed := false
		out := make([]any, len(x))
		for i, e := range x {
			var c bool
			out[i], c = r.value(e)
			changed = changed || c
		}
		if !changed {
			return v, false
		}
		return out, true
	}
	return v, false
}

// protocolKeys are the object keys of MCP and JSON-RPC messages and of
// the JSON schemas they carry.
var protocolKeys = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`jsonrpc id method params result error code message data
		_meta name title description type text uri mimeType blob size icons src annotations audience priority lastModified
		content contents messages role model tools prompts resources resourceTemplates uriTemplate arguments required
		inputSchema outputSchema structuredContent isError nextCursor cursor completion values total hasMore ref argument
		progress progressToken level logger systemPrompt maxTokens stopReason requestedSchema action includeContext
		metadata temperature modelPreferences hints roots capabilities serverInfo clientInfo protocolVersion instructions
		properties items enum default format minimum maximum minLength maxLength pattern anyOf oneOf allOf not const
		$schema $ref $defs definitions additionalProperties examples readOnlyHint destructiveHint idempotentHint openWorldHint
		ttlMs cacheScope resultType inputRequests requestState`) {
		protocolKeys[k] = true
	}
}

// JSON masks every known secret in a JSON document: every string and key
// of it, however the document escaped them (the document is decoded, so
// "\u0073ecret" is found as well as "secret"). It returns b itself when
// nothing was masked.
func (r *Redactor) JSON(b []byte) ([]byte, bool, error) { return r.json(b, false) }

// json is JSON; canonical says b was written by encoding/json, whose only
// \u escapes are those of jsonEscaped, so a document holding no probe
// needs no decoding.
func (r *Redactor) json(b []byte, canonical bool) ([]byte, bool, error) {
	m := r.matcherFor()
	if m == nil || (!m.mayContainBytes(b) && (canonical || !bytes.Contains(b, []byte(`\u`)))) {
		return b, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false, fmt.Errorf("secrets: decode for redaction: %w", err)
	}
	out, changed := r.value(v)
	if !changed {
		return b, false, nil
	}
	nb, err := json.Marshal(out)
	if err != nil {
		return nil, false, fmt.Errorf("secrets: encode after redaction: %w", err)
	}
	return nb, true, nil
}

// Encoded masks every known secret in v through its JSON encoding, so no
// field of it, known or added later, can be missed. When something was
// masked it returns a new value of v's type decoded from the masked
// encoding; otherwise v itself. v must be a pointer (or a value) of a type
// that round-trips through encoding/json.
func (r *Redactor) Encoded(v any) (any, bool, error) {
	if r.Empty() || v == nil {
		return v, false, nil
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && rv.IsNil() {
		return v, false, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false, fmt.Errorf("secrets: encode for redaction: %w", err)
	}
	nb, changed, err := r.json(b, true)
	if err != nil || !changed {
		return v, false, err
	}
	t := reflect.TypeOf(v)
	var fresh reflect.Value
	if t.Kind() == reflect.Pointer {
		fresh = reflect.New(t.Elem())
	} else {
		fresh = reflect.New(t)
	}
	if err := json.Unmarshal(nb, fresh.Interface()); err != nil {
		return nil, false, fmt.Errorf("secrets: decode after redaction: %w", err)
	}
	if t.Kind() == reflect.Pointer {
		return fresh.Interface(), true, nil
	}
	return fresh.Elem().Interface(), true, nil
}

// CleanEncoding reports whether b, a value's encoding by encoding/json's
// Marshal (whose only \u escapes are those of jsonEscaped), holds no known
// secret: then Encoded leaves that value as it is, and b can be sent in
// its place. It is the check Encoded makes on the encoding it writes.
func (r *Redactor) CleanEncoding(b []byte) bool {
	m := r.matcherFor()
	return m == nil || !m.mayContainBytes(b)
}

// Canonical masks every known secret in b on its bytes, as JSON masks the
// document b decodes to: each string value masked as decoded and written
// back as Marshal writes it, each number whose digits hold a secret
// written as 0. b must be in encoding/json's canonical form (Marshal's
// escapes, compact, keys without escapes), which callers check, so a
// secret, however it was spelt, is found in the decoded strings. ok is
// false when the bytes path cannot give JSON's answer and the caller must
// decode: a key holds a secret (JSON renames the key, which may reorder
// the object), or b is not as expected. It returns b itself when nothing
// was masked.
func (r *Redactor) Canonical(b []byte) (out []byte, changed, ok bool) {
	if r.CleanEncoding(b) {
		return b, false, true
	}
	last := 0 // b[:last] is in out
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			end := stringEnd(b, i)
			if end < 0 {
				return nil, false, false
			}
			var s string
			if err := json.Unmarshal(b[i:end], &s); err != nil {
				return nil, false, false
			}
			masked := r.String(s)
			if end < len(b) && b[end] == ':' {
				if masked != s && !protocolKeys[s] {
					return nil, false, false
				}
			} else if masked != s {
				enc, err := json.Marshal(masked)
				if err != nil {
					return nil, false, false
				}
				out = append(append(out, b[last:i]...), enc...)
				last = end
			}
			i = end
		case c == '-' || c >= '0' && c <= '9':
			end := i + 1
			for end < len(b) && bytes.IndexByte([]byte("+-.0123456789eE"), b[end]) >= 0 {
				end++
			}
			if num := string(b[i:end]); r.String(num) != num {
				out = append(append(out, b[last:i]...), '0')
				last = end
			}
			i = end
		default:
			i++
		}
	}
	if out == nil {
		return b, false, true
	}
	return append(out, b[last:]...), true, true
}

// stringEnd returns the index after the JSON string token at b[i], or -1.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

func (r *Redactor) matcherFor() *matcher {
	if r == nil {
		return nil
	}
	return r.m.Load()
}

func (m *matcher) mayContainBytes(b []byte) bool { return scan(m, b) }
