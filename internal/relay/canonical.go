package relay

import (
	"bytes"
	"math"
	"strconv"
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
