package relay

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Canonical reports whether b is exactly what encoding/json's Marshal
// writes for the value b decodes to (objects as maps, numbers as
// json.Number): compact, object keys sorted and unique, strings escaped as
// Marshal escapes them ('<', '>', '&', U+2028 and U+2029 included). Such
// bytes can stand in for "decode, then Marshal" (the audit's arguments
// hash) without decoding. It is strict: a key with an escape, or anything
// it is unsure of, is reported as not canonical, and the caller decodes.
func Canonical(b []byte) bool {
	end, ok := canonicalValue(b, 0, false)
	return ok && end == len(b)
}

// canonicalValue checks the value starting at b[i] and returns the index
// after it. With floats, numbers must be as Marshal writes a float64 (the
// SDK decodes untyped numbers to float64), else as they are (json.Number).
func canonicalValue(b []byte, i int, floats bool) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		return canonicalString(b, i)
	case c == '{':
		i++
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		var prev []byte
		for {
			end, ok := canonicalString(b, i)
			if !ok {
				return 0, false
			}
			key := b[i+1 : end-1]
			// A key without escapes reads as its bytes, so byte order is
			// the order Marshal sorts decoded keys in; strictly greater
			// also rules out a duplicate, which decodes to its last value.
			if bytes.IndexByte(key, '\\') >= 0 || prev != nil && bytes.Compare(prev, key) >= 0 {
				return 0, false
			}
			prev = key
			if end >= len(b) || b[end] != ':' {
				return 0, false
			}
			if i, ok = canonicalValue(b, end+1, floats); !ok || i >= len(b) {
				return 0, false
			}
			switch b[i] {
			case '}':
				return i + 1, true
			case ',':
				i++
			default:
				return 0, false
			}
		}
	case c == '[':
		i++
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = canonicalValue(b, i, floats); !ok || i >= len(b) {
				return 0, false
			}
			switch b[i] {
			case ']':
				return i + 1, true
			case ',':
				i++
			default:
				return 0, false
			}
		}
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || c >= '0' && c <= '9':
		end := numberEnd(b, i)
		if end < 0 {
			return 0, false
		}
		if floats && !canonicalFloat(b[i:end]) {
			return 0, false
		}
		return end, true
	}
	return 0, false
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

// numberEnd returns the index after the JSON number at b[i], or -1 when
// it is not one by JSON's grammar.
func numberEnd(b []byte, i int) int {
	digits := func(i int) int {
		j := i
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		return j
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = digits(i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

// canonicalFloat reports whether num is as encoding/json writes the
// float64 it parses to (its floatEncoder: ES6 style).
func canonicalFloat(num []byte) bool {
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil || math.IsInf(f, 0) {
		return false
	}
	var buf [32]byte
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	out := strconv.AppendFloat(buf[:0], f, format, -1, 64)
	if format == 'e' {
		if n := len(out); n >= 4 && out[n-4] == 'e' && out[n-3] == '-' && out[n-2] == '0' {
			out[n-2] = out[n-1]
			out = out[:n-1]
		}
	}
	return bytes.Equal(out, num)
}

// canonicalString checks the string token at b[i], escaped as Marshal
// escapes (HTML characters too), and returns the index after it.
func canonicalString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	for j := i + 1; j < len(b); {
		c := b[j]
		switch {
		case c == '"':
			return j + 1, true
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			return 0, false
		case c == '\\':
			n := canonicalEscape(b[j:])
			if n == 0 {
				return 0, false
			}
			j += n
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(b[j:])
			if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
				return 0, false // Marshal writes \ufffd, \u2028, \u2029
			}
			j += size
		}
	}
	return 0, false
}

// canonicalEscape returns the length of the escape at the start of e when
// it is the one Marshal writes for its character, else 0.
func canonicalEscape(e []byte) int {
	if len(e) < 2 {
		return 0
	}
	switch e[1] {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if len(e) < 6 {
			return 0
		}
		switch u := string(e[2:6]); u {
		case "003c", "003e", "0026", "2028", "2029":
			return 6
		default:
			// Other control characters, in lower-case hex.
			if u[0] != '0' || u[1] != '0' || u[2] != '0' && u[2] != '1' || !lowerHex(u[3]) {
				return 0
			}
			switch u[2:] {
			case "08", "0c", "0a", "0d", "09":
				return 0 // \b, \f, \n, \r, \t
			}
			return 6
		}
	}
	return 0
}

func lowerHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

// AppendCanonical appends to dst what encoding/json's Marshal writes for
// the value the JSON document b decodes to (objects as maps, numbers as
// json.Number), working on the bytes: keys sorted, the last of duplicate
// keys kept (as decoding into a map does), strings escaped as Marshal
// escapes them, spaces dropped. It returns false when b is not one valid
// JSON value.
func AppendCanonical(dst, b []byte) ([]byte, bool) {
	if !json.Valid(b) {
		return dst, false
	}
	i := skipSpace(b, 0)
	dst, end, ok := appendCanonical(dst, b, i)
	if !ok || skipSpace(b, end) != len(b) {
		return dst, false
	}
	return dst, true
}

// appendCanonical appends the canonical form of the value at b[i] (b is
// valid JSON) and returns the index after it.
func appendCanonical(dst, b []byte, i int) ([]byte, int, bool) {
	switch c := b[i]; c {
	case '"':
		end := stringEnd(b, i)
		if end < 0 {
			return dst, 0, false
		}
		if e, ok := canonicalString(b, i); ok && e == end {
			return append(dst, b[i:end]...), end, true
		}
		var s string
		if err := json.Unmarshal(b[i:end], &s); err != nil {
			return dst, 0, false
		}
		enc, err := json.Marshal(s)
		if err != nil {
			return dst, 0, false
		}
		return append(dst, enc...), end, true
	case '{':
		type member struct {
			key        string
			start, end int // the value's bytes
		}
		var ms []member
		i = skipSpace(b, i+1)
		if b[i] != '}' {
			for {
				end := stringEnd(b, i)
				if end < 0 {
					return dst, 0, false
				}
				var key string
				if err := json.Unmarshal(b[i:end], &key); err != nil {
					return dst, 0, false
				}
				i = skipSpace(b, skipSpace(b, end)+1) // past ':'
				vend := valueEnd(b, i)
				if vend < 0 {
					return dst, 0, false
				}
				ms = append(ms, member{key, i, vend})
				i = skipSpace(b, vend)
				if b[i] == '}' {
					break
				}
				i = skipSpace(b, i+1) // past ','
			}
		}
		// Sorted by key, the last of equal keys first so it is kept.
		idx := make([]int, len(ms))
		for k := range idx {
			idx[k] = k
		}
		slices.SortStableFunc(idx, func(x, y int) int {
			if c := strings.Compare(ms[x].key, ms[y].key); c != 0 {
				return c
			}
			return y - x
		})
		dst = append(dst, '{')
		n := 0
		for k, x := range idx {
			if k > 0 && ms[idx[k-1]].key == ms[x].key {
				continue
			}
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
			enc, err := json.Marshal(ms[x].key)
			if err != nil {
				return dst, 0, false
			}
			dst = append(append(dst, enc...), ':')
			var ok bool
			if dst, _, ok = appendCanonical(dst, b, ms[x].start); !ok {
				return dst, 0, false
			}
		}
		return append(dst, '}'), i + 1, true
	case '[':
		dst = append(dst, '[')
		i = skipSpace(b, i+1)
		if b[i] == ']' {
			return append(dst, ']'), i + 1, true
		}
		for n := 0; ; n++ {
			if n > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, i, ok = appendCanonical(dst, b, i); !ok {
				return dst, 0, false
			}
			i = skipSpace(b, i)
			if b[i] == ']' {
				return append(dst, ']'), i + 1, true
			}
			i = skipSpace(b, i+1)
		}
	}
	end := valueEnd(b, i) // a number or a literal, written as it is
	if end < 0 {
		return dst, 0, false
	}
	return append(dst, b[i:end]...), end, true
}
