package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// The record encoder writes, without reflection, the bytes encoding/json
// wrote for a record whose fields had been round-tripped through JSON
// (marshalled, decoded with UseNumber, redacted) and marshalled again: the
// same key order, number forms, escapes and replacement of invalid UTF-8.
// Logs written before it verify unchanged, and a record hashes to the same
// value whichever encoder wrote it (TestEncoderMatchesReflection).
// Values of types it does not know (structs, named types, json.Marshaler
// implementations) are still round-tripped through encoding/json.

// maxDirectDepth is how deep maps and slices are walked directly; deeper
// values go through encoding/json, which detects cycles.
const maxDirectDepth = 1000

// bodyPool holds the buffers a record's middle (time to fields) is encoded
// into before the lock is taken.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// encodeBody appends the record's fields from "time" to "fields" (without
// braces, seq, prev or hash), redacted.
func (l *Log) encodeBody(b []byte, e *Event) ([]byte, error) {
	r := l.redact
	if r == nil {
		r = func(s string) string { return s }
	}
	b = append(b, `"time":"`...)
	b, err := e.Time.AppendText(b)
	if err != nil {
		// Out of range for RFC 3339: say so as encoding/json did.
		_, err = e.Time.MarshalJSON()
		return nil, fmt.Errorf("audit: encode %s event: json: error calling MarshalJSON for type time.Time: %v", e.Type, err)
	}
	b = append(b, '"')
	b = append(b, `,"type":`...)
	b = appendString(b, r(e.Type))
	for _, f := range [...]struct {
		key string
		val string
	}{{`,"session":`, e.Session}, {`,"principal":`, e.Principal}, {`,"replica":`, e.Replica}, {`,"server":`, e.Server}, {`,"tool":`, e.Tool}, {`,"action":`, e.Action}, {`,"reason":`, e.Reason}} {
		if v := r(f.val); v != "" {
			b = append(b, f.key...)
			b = appendString(b, v)
		}
	}
	if len(e.Fields) > 0 {
		b = append(b, `,"fields":`...)
		fe := fieldEncoder{redact: l.redact}
		if b, err = fe.appendMap(b, e.Fields, 0); err != nil {
			return nil, fmt.Errorf("audit: encode %s event: %v", e.Type, err)
		}
	}
	return b, nil
}

// appendLine appends the whole record line (newline included) for body at
// seq after prev, and returns it with the record's hash: the SHA-256 of
// the line with the hash field empty.
func appendLine(b []byte, seq uint64, body []byte, prev string) ([]byte, string) {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, ',')
	b = append(b, body...)
	b = append(b, `,"prev":`...)
	b = appendString(b, prev)
	b = append(b, `,"hash":"`...)
	sum := sha256.Sum256(append(b, `"}`...))
	var hx [64]byte
	hex.Encode(hx[:], sum[:])
	b = append(b, hx[:]...)
	b = append(b, "\"}\n"...)
	return b, string(hx[:])
}

// fieldEncoder encodes an event's fields as they read after a JSON round
// trip, redacting every string, keys included.
type fieldEncoder struct {
	redact func(string) string
}

// str is s as a decoder gives it back (each invalid UTF-8 byte replaced by
// U+FFFD), redacted.
func (fe fieldEncoder) str(s string) string {
	if !utf8.ValidString(s) {
		var sb strings.Builder
		for i := 0; i < len(s); {
			c, size := utf8.DecodeRuneInString(s[i:])
			if c == utf8.RuneError && size == 1 {
				sb.WriteRune(utf8.RuneError)
			} else {
				sb.WriteString(s[i : i+size])
			}
			i += size
		}
		s = sb.String()
	}
	if fe.redact != nil {
		s = fe.redact(s)
	}
	return s
}

type fieldKV struct {
	key, orig string
	val       any
}

func (fe fieldEncoder) appendMap(b []byte, m map[string]any, depth int) ([]byte, error) {
	if m == nil {
		return append(b, "null"...), nil
	}
	var small [16]fieldKV
	kvs := small[:0]
	for k, v := range m {
		kvs = append(kvs, fieldKV{key: fe.str(k), orig: k, val: v})
	}
	// Sorted by the key written; of keys that become equal, the one
	// sorting last by its original spelling wins, as decoding the
	// marshalled map kept the last.
	slices.SortFunc(kvs, func(a, b fieldKV) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.orig, b.orig)
	})
	b = append(b, '{')
	first := true
	for i, kv := range kvs {
		if i+1 < len(kvs) && kvs[i+1].key == kv.key {
			// Not written, but encoding/json refused the whole map
			// for a value it could not encode.
			if _, err := fe.appendValue(nil, kv.val, depth+1); err != nil {
				return nil, err
			}
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, kv.key)
		b = append(b, ':')
		var err error
		if b, err = fe.appendValue(b, kv.val, depth+1); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func (fe fieldEncoder) appendValue(b []byte, v any, depth int) ([]byte, error) {
	if depth > maxDirectDepth {
		return fe.appendRoundTrip(b, v)
	}
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, fe.str(x)), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case float64:
		return appendFloat(b, x, 64)
	case float32:
		return appendFloat(b, float64(x), 32)
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case int32:
		return strconv.AppendInt(b, int64(x), 10), nil
	case uint64:
		return strconv.AppendUint(b, x, 10), nil
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10), nil
	case uint:
		return strconv.AppendUint(b, uint64(x), 10), nil
	case json.Number:
		if x == "" {
			return append(b, '0'), nil // as encoding/json writes it
		}
		if !isValidNumber(string(x)) {
			return fe.appendRoundTrip(b, v) // for encoding/json's error
		}
		return append(b, x...), nil
	case map[string]any:
		return fe.appendMap(b, x, depth)
	case []any:
		if x == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = fe.appendValue(b, e, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case []string:
		if x == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, fe.str(e))
		}
		return append(b, ']'), nil
	}
	return fe.appendRoundTrip(b, v)
}

// appendRoundTrip encodes a value of a type the encoder does not know the
// way the record always held it: marshalled by encoding/json and decoded
// back into maps, slices, strings and numbers.
func (fe fieldEncoder) appendRoundTrip(b []byte, v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	// Decoded values hold no cycles: walk them whatever their depth.
	return fe.appendDecoded(b, out)
}

func (fe fieldEncoder) appendDecoded(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case map[string]any:
		return fe.appendMapDecoded(b, x)
	case []any:
		if x == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = fe.appendDecoded(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	return fe.appendValue(b, v, 0) // a scalar
}

func (fe fieldEncoder) appendMapDecoded(b []byte, m map[string]any) ([]byte, error) {
	if m == nil {
		return append(b, "null"...), nil
	}
	kvs := make([]fieldKV, 0, len(m))
	for k, v := range m {
		kvs = append(kvs, fieldKV{key: fe.str(k), orig: k, val: v})
	}
	slices.SortFunc(kvs, func(a, b fieldKV) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.orig, b.orig)
	})
	b = append(b, '{')
	first := true
	for i, kv := range kvs {
		if i+1 < len(kvs) && kvs[i+1].key == kv.key {
			continue // decoded values all encode
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, kv.key)
		b = append(b, ':')
		var err error
		if b, err = fe.appendDecoded(b, kv.val); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendFloat writes f as encoding/json does (ES6 number formatting).
func appendFloat(b []byte, f float64, bits int) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		if bits == 32 {
			_, err := json.Marshal(float32(f))
			return nil, err
		}
		_, err := json.Marshal(f)
		return nil, err
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// e-09 is written e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string the way encoding/json.Marshal
// does: HTML characters, U+2028 and U+2029 escaped, each invalid UTF-8
// byte written \ufffd.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// isValidNumber reports whether s is a JSON number (RFC 8259 section 6),
// as encoding/json checks a json.Number before writing it.
func isValidNumber(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '-' {
		s = s[1:]
		if s == "" {
			return false
		}
	}
	switch {
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		s = s[1:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	default:
		return false
	}
	if len(s) >= 2 && s[0] == '.' && '0' <= s[1] && s[1] <= '9' {
		s = s[2:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			s = s[1:]
			if s == "" {
				return false
			}
		}
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	return s == ""
}
