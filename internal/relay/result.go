package relay

import (
	"bytes"
	"encoding/json"
)

// PlainResult reads a tool call's result as an upstream sent it and
// reports whether it is one the gateway can forward as it came: bytes
// that decode into the SDK's CallToolResult without error and encode back
// to exactly themselves, so forwarding them answers what decoding and
// re-encoding them would, and the seal's check of that encoding can run
// on them. It also returns the result's isError. It takes only the shape
// most results have, as the SDK writes it:
//
//	{"content":[{"type":"text","text":"..."},...],"structuredContent":...,"isError":true,"resultType":"complete"}
//
// with at least one text item, structuredContent (optional, not null)
// in Marshal's canonical form with numbers as float64s, and isError and
// resultType optional. Anything else (other content, annotations, _meta,
// whitespace, an escape Marshal would not write) is not plain, and the
// caller decodes.
func PlainResult(b []byte) (isError, ok bool) { return plainResult(b, nil) }

// PlainTexts returns the text of each content item of a result PlainResult
// takes, as decoding it would give them.
func PlainTexts(b []byte) ([]string, bool) {
	var texts []string
	_, ok := plainResult(b, func(tok []byte) bool {
		if bytes.IndexByte(tok, '\\') < 0 {
			texts = append(texts, string(tok[1:len(tok)-1]))
			return true
		}
		var s string
		if json.Unmarshal(tok, &s) != nil {
			return false
		}
		texts = append(texts, s)
		return true
	})
	if !ok {
		return nil, false
	}
	return texts, true
}

// plainResult is PlainResult, calling text (when not nil) with each text
// item's string token; text returning false makes the result not plain.
func plainResult(b []byte, text func(tok []byte) bool) (isError, ok bool) {
	i, ok := prefix(b, 0, `{"content":[`)
	if !ok {
		return false, false
	}
	for {
		if i, ok = prefix(b, i, `{"type":"text","text":`); !ok {
			return false, false
		}
		start := i
		if i, ok = canonicalString(b, i); !ok {
			return false, false
		}
		if text != nil && !text(b[start:i]) {
			return false, false
		}
		if i, ok = prefix(b, i, "}"); !ok {
			return false, false
		}
		if j, more := prefix(b, i, ","); more {
			i = j
			continue
		}
		if i, ok = prefix(b, i, "]"); !ok {
			return false, false
		}
		break
	}
	if j, ok := prefix(b, i, `,"structuredContent":`); ok {
		if _, null := prefix(b, j, "null"); null {
			return false, false // decodes to nil, which is left out
		}
		if i, ok = canonicalValue(b, j, true); !ok {
			return false, false
		}
	}
	if j, ok := prefix(b, i, `,"isError":true`); ok {
		i, isError = j, true
	}
	if j, ok := prefix(b, i, `,"resultType":"complete"`); ok {
		i = j
	}
	return isError, i == len(b)-1 && b[i] == '}'
}

// prefix returns the index after p when b[i:] starts with it.
func prefix(b []byte, i int, p string) (int, bool) {
	if len(b)-i < len(p) || string(b[i:i+len(p)]) != p {
		return i, false
	}
	return i + len(p), true
}
