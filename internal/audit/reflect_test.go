package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The reflection-based encoder the log used before encode.go, kept as the
// reference the hand-written one must match byte for byte.

// canonical returns fields as JSON would give them back (maps, slices,
// strings, json.Number), redacted: what is hashed and written is then
// exactly what a reader decodes, whatever structs a caller passed.
func canonicalReflect(m map[string]any, redact func(string) string) (map[string]any, error) {
	if len(m) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	if redact != nil {
		out = redactMap(out, redact)
	}
	return out, nil
}

func redactMap(m map[string]any, r func(string) string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[r(k)] = redactValue(v, r)
	}
	return out
}

func redactValue(v any, r func(string) string) any {
	switch x := v.(type) {
	case string:
		return r(x)
	case map[string]any:
		return redactMap(x, r)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = redactValue(e, r)
		}
		return out
	}
	return v // json.Number, bool, nil
}

// encode produces the record's line (the bytes written, newline included)
// and its hash, computed over exactly those bytes with the hash field
// empty. The record is encoded once; Verify hashes the bytes it reads, so
// nothing depends on re-encoding giving the same bytes.
func encodeReflect(e *Event) ([]byte, string, error) {
	body, err := json.Marshal(e)
	if err != nil {
		return nil, "", fmt.Errorf("audit: encode %s event: %v", e.Type, err)
	}
	if !bytes.HasSuffix(body, []byte(emptyHash)) {
		return nil, "", fmt.Errorf("audit: encoded %s event does not end with its hash field", e.Type)
	}
	hash := hashOf(body)
	line := make([]byte, 0, len(body)+len(hash)+1)
	line = append(line, body[:len(body)-2]...) // up to `"hash":"`
	line = append(line, hash...)
	line = append(line, "\"}\n"...)
	return line, hash, nil
}

// appendReflect is Append's encoding as it was: redaction, the JSON round
// trip of the fields, then json.Marshal of the whole record.
func appendReflect(e Event, redact func(string) string) ([]byte, string, error) {
	fields, err := canonicalReflect(e.Fields, redact)
	if err != nil {
		return nil, "", fmt.Errorf("audit: encode %s event: %v", e.Type, err)
	}
	e.Fields = fields
	if r := redact; r != nil {
		e.Type, e.Session, e.Server, e.Tool = r(e.Type), r(e.Session), r(e.Server), r(e.Tool)
		e.Principal, e.Replica = r(e.Principal), r(e.Replica)
		e.Action, e.Reason = r(e.Action), r(e.Reason)
	}
	return encodeReflect(&e)
}
