// Package relay reads and writes the JSON-RPC envelope of MCP messages as
// bytes, for the hot path of a tool call: only the envelope (id, method,
// params.name) is parsed, and the arguments and the result travel as the
// bytes they arrived as. Anything the parser is not sure of (a duplicate
// or escaped key in the envelope, a member it does not know, invalid JSON)
// is reported as not parsed, and the caller takes the SDK's path instead:
// the gateway never decides on one reading of a message and forwards
// another.
package relay

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// Message is the envelope of one JSON-RPC message. Its slices point into
// the parsed bytes.
type Message struct {
	// ID is the id's JSON token (a number or a string with its quotes);
	// nil for a notification.
	ID     []byte
	Method string
	// Params is the raw params object, nil if absent.
	Params []byte
	// Name and Arguments are params.name and params.arguments of a
	// tools/call (Arguments nil when absent); Meta is params._meta.
	Name      string
	Arguments []byte
	Meta      []byte
	// Result and Error are a response's raw members.
	Result []byte
	Error  []byte
}

// ErrFallback says the message must take the SDK's path.
var ErrFallback = errors.New("relay: envelope not handled by the lean path")

// Parse reads msg's envelope. For a tools/call request it also reads
// params' members (name, arguments, _meta and nothing else). It returns
// ErrFallback for anything it does not take on: invalid JSON, a key that
// is escaped or appears twice at the levels it reads, an unknown member,
// or a batch.
func Parse(msg []byte) (Message, error) {
	var m Message
	if !json.Valid(msg) {
		return m, ErrFallback
	}
	var version bool
	err := members(msg, func(key, val []byte) error {
		switch string(key) {
		case "jsonrpc":
			if string(val) != `"2.0"` {
				return ErrFallback
			}
			version = true
		case "id":
			if val[0] != '"' && val[0] != '-' && (val[0] < '0' || val[0] > '9') {
				return ErrFallback // null, or not an id at all
			}
			if val[0] == '"' && (bytes.IndexByte(val, '\\') >= 0 || !utf8.Valid(val)) {
				return ErrFallback
			}
			m.ID = val
		case "method":
			s, ok := plainString(val)
			if !ok {
				return ErrFallback
			}
			m.Method = s
		case "params":
			if val[0] != '{' {
				return ErrFallback
			}
			m.Params = val
		case "result":
			m.Result = val
		case "error":
			m.Error = val
		default:
			return ErrFallback
		}
		return nil
	})
	if err != nil || !version {
		return Message{}, ErrFallback
	}
	if m.Method == "tools/call" {
		if m.Params == nil || m.ID == nil {
			return Message{}, ErrFallback
		}
		var named bool
		err := members(m.Params, func(key, val []byte) error {
			switch string(key) {
			case "name":
				s, ok := plainString(val)
				if !ok {
					return ErrFallback
				}
				m.Name, named = s, true
			case "arguments":
				m.Arguments = val
			case "_meta":
				m.Meta = val
			default:
				return ErrFallback
			}
			return nil
		})
		if err != nil || !named {
			return Message{}, ErrFallback
		}
	}
	return m, nil
}

// plainString returns a JSON string token's text when it has no escapes.
func plainString(tok []byte) (string, bool) {
	if len(tok) < 2 || tok[0] != '"' || bytes.IndexByte(tok, '\\') >= 0 || !utf8.Valid(tok) {
		return "", false // an escape or invalid UTF-8 reads differently decoded
	}
	return string(tok[1 : len(tok)-1]), true
}

// members calls f with each member of the JSON object obj (valid JSON),
// in order. A key with an escape, or one seen before, is ErrFallback.
func members(obj []byte, f func(key, val []byte) error) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return ErrFallback
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	var seen [8][]byte // compared as bytes: a string per key cost an allocation each
	n := 0
	for i < len(obj) {
		end := stringEnd(obj, i)
		if end < 0 {
			return ErrFallback
		}
		raw := obj[i+1 : end-1]
		if bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) {
			return ErrFallback
		}
		key := raw
		for _, k := range seen[:min(n, len(seen))] {
			if bytes.Equal(k, key) {
				return ErrFallback
			}
		}
		if n >= len(seen) {
			return ErrFallback // more members than an envelope has
		}
		seen[n] = key
		n++
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return ErrFallback
		}
		i = skipSpace(obj, i+1)
		vend := valueEnd(obj, i)
		if vend < 0 {
			return ErrFallback
		}
		if err := f(key, obj[i:vend]); err != nil {
			return err
		}
		i = skipSpace(obj, vend)
		if i >= len(obj) {
			return ErrFallback
		}
		if obj[i] == '}' {
			return nil
		}
		if obj[i] != ',' {
			return ErrFallback
		}
		i = skipSpace(obj, i+1)
	}
	return ErrFallback
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the string token starting at b[i].
func stringEnd(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
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

// valueEnd returns the index after the JSON value starting at b[i] (the
// input is known to be valid JSON).
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := stringEnd(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// AppendRequest appends a JSON-RPC request with the given id token,
// method and raw params (nil: none) to buf.
func AppendRequest(buf, id []byte, method string, params []byte) []byte {
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	buf = append(buf, id...)
	buf = append(buf, `,"method":"`...)
	buf = append(buf, method...) // method names are plain: callers pass constants
	buf = append(buf, '"')
	if params != nil {
		buf = append(buf, `,"params":`...)
		buf = append(buf, params...)
	}
	return append(buf, '}')
}

// AppendResponse appends a JSON-RPC response with the given id token and
// either a raw result or a raw error object to buf.
func AppendResponse(buf, id, result, rpcErr []byte) []byte {
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	buf = append(buf, id...)
	if rpcErr != nil {
		buf = append(buf, `,"error":`...)
		buf = append(buf, rpcErr...)
	} else {
		buf = append(buf, `,"result":`...)
		buf = append(buf, result...)
	}
	return append(buf, '}')
}

// AppendCallParams appends tools/call params with the tool's name, its raw
// arguments (nil: none) and raw _meta (nil: none) to buf.
func AppendCallParams(buf []byte, name string, args, meta []byte) []byte {
	buf = append(buf, `{"name":`...)
	buf = appendString(buf, name)
	if args != nil {
		buf = append(buf, `,"arguments":`...)
		buf = append(buf, args...)
	}
	if meta != nil {
		buf = append(buf, `,"_meta":`...)
		buf = append(buf, meta...)
	}
	return append(buf, '}')
}

func appendString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			b, _ := json.Marshal(s)
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}
