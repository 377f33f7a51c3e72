package relay

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// canonicalCorpus holds bytes that are and are not Marshal's encoding.
var canonicalCorpus = []string{
	`{}`, `[]`, `{"a":1,"b":[true,false,null],"c":{"d":"e"}}`, `{"message":"hi"}`,
	`{"n":1.50,"m":1e2,"o":-0,"p":12345678901234567890123}`,
	`{"s":"\u003c\u003e\u0026 \u2028\u2029 \b\f\n\r\t \u0001\u001f \"\\ é 日本 🎉"}`,
	`{"s":"<"}`, `{"s":"\u0041"}`, `{"s":"\/"}`, `{"s":"\u003C"}`, `{"s":"\u000a"}`, "{\"s\":\"\u2028\"}",
	"{\"s\":\"\xff\"}", `{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"\u0061":1}`, `{"a": 1}`, ` {}`, `{"a":01}`,
	`{"a":-}`, `{"a":1.}`, `{"a":1e}`, `{"a":[1,]}`, `{"a":tru}`, `"x"`, `{"":0,"a":{"":[]}}`,
	`{"a":{"b":{"c":[[[{"x":"y"}]]]}}}`, `{"B":1,"a":2}`, `{"a":2,"B":1}`, `{"é":1,"z":2}`, `{"z":1,"é":2}`,
}

// Bytes Canonical accepts are exactly what decoding (numbers as
// json.Number) and Marshal give back; and Marshal's output is accepted
// unless a key needed an escape.
func FuzzCanonicalAgreesWithMarshal(f *testing.F) {
	for _, s := range canonicalCorpus {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		derr := dec.Decode(&v)
		if derr == nil && dec.More() {
			derr = errNotOne
		}
		if Canonical(b) {
			if derr != nil {
				t.Fatalf("Canonical(%q) but it does not decode: %v", b, derr)
			}
			m, err := json.Marshal(v)
			if err != nil || !bytes.Equal(m, b) {
				t.Fatalf("Canonical(%q) but Marshal gives %q (%v)", b, m, err)
			}
		}
		if derr != nil {
			return
		}
		m, err := json.Marshal(v)
		if err != nil {
			return
		}
		if !bytes.Contains(m, []byte(`\`)) && !Canonical(m) {
			t.Fatalf("Marshal's own output %q is not Canonical", m)
		}
	})
}

var errNotOne = bytes.ErrTooLarge

func TestCanonical(t *testing.T) {
	for s, want := range map[string]bool{
		`{"message":"hi"}`:       true,
		`{"a":1,"b":2}`:          true,
		`{"b":1,"a":2}`:          false, // key order
		`{"a":1,"a":2}`:          false, // duplicate: decodes to its last value
		`{"a": 1}`:               false, // space
		`{"s":"<"}`:              false, // Marshal writes \u003c
		`{"s":"\u003c"}`:         true,
		`{"s":"\u0041"}`:         false, // Marshal writes A
		`{"s":"\/"}`:             false,
		`{"\u0061":1}`:           false, // escaped key: not judged
		`{"n":1.50}`:             true,  // json.Number: as it is
		"{\"s\":\"\xff\"}":       false, // Marshal writes \ufffd
		"{\"s\":\"\u2028\"}":     false,
		`{"s":"\u2028\u0001\b"}`: true,
	} {
		if got := Canonical([]byte(s)); got != want {
			t.Errorf("Canonical(%s) = %v, want %v", s, got, want)
		}
	}
}

// resultCorpus are tool results as upstreams write them.
var resultCorpus = []string{
	`{"content":[{"type":"text","text":"hi"}]}`,
	`{"content":[{"type":"text","text":"a\u003cb"},{"type":"text","text":""}],"isError":true}`,
	`{"content":[{"type":"text","text":"x"}],"structuredContent":{"a":[1,2.5,"\u0026"],"b":null},"isError":true,"resultType":"complete"}`,
	`{"content":[{"type":"text","text":"x"}],"structuredContent":{"n":1.50}}`,
	`{"content":[{"type":"text","text":"x"}],"structuredContent":{"n":12345678901234567890}}`,
	`{"content":[{"type":"text","text":"x"}],"structuredContent":null}`,
	`{"content":[{"type":"text","text":"x"}],"structuredContent":{"b":1,"a":2}}`,
	`{"content":[{"type":"text","text":"x"}],"isError":false}`,
	`{"content":[]}`, `{"content":null}`, `{}`, `{"content":[{"type":"text","text":"x","_meta":{}}]}`,
	`{"content":[{"type":"image","data":"AA==","mimeType":"image/png"}]}`,
	`{"_meta":{"a":1},"content":[{"type":"text","text":"x"}]}`,
	`{"content":[{"type":"text","text":"x"}],"extra":1}`,
	`{"content":[{"type":"text","text":"x"}],"resultType":"input_required"}`,
	`{"content":[{"type":"text","text":"<"}]}`,
}

// A result PlainResult accepts decodes into the SDK's CallToolResult,
// with the isError it reported, and encodes back (by Marshal, as the seal
// does, and without HTML escaping, as the relay answers) to itself.
func FuzzPlainResultRoundTrips(f *testing.F) {
	for _, s := range resultCorpus {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		isError, ok := PlainResult(b)
		if !ok {
			return
		}
		var res mcp.CallToolResult
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("PlainResult(%q) but it does not decode: %v", b, err)
		}
		if res.IsError != isError {
			t.Fatalf("PlainResult(%q): isError %v, decoded %v", b, isError, res.IsError)
		}
		texts, ok := PlainTexts(b)
		if !ok || len(texts) != len(res.Content) {
			t.Fatalf("PlainTexts(%q) = %q, %v; decoded %d items", b, texts, ok, len(res.Content))
		}
		for n, c := range res.Content {
			if tc, isText := c.(*mcp.TextContent); !isText || tc.Text != texts[n] {
				t.Fatalf("PlainTexts(%q)[%d] = %q, decoded %#v", b, n, texts[n], c)
			}
		}
		m, err := json.Marshal(&res)
		if err != nil || !bytes.Equal(m, b) {
			t.Fatalf("PlainResult(%q) but Marshal gives %q (%v)", b, m, err)
		}
		var e bytes.Buffer
		enc := json.NewEncoder(&e)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(&res); err != nil || !bytes.Equal(bytes.TrimSuffix(e.Bytes(), []byte("\n")), b) {
			t.Fatalf("PlainResult(%q) but the relay's encoding gives %q (%v)", b, e.Bytes(), err)
		}
	})
}

func TestPlainResult(t *testing.T) {
	plain := map[string]bool{}
	for _, s := range resultCorpus[:3] {
		plain[s] = true
	}
	for _, s := range resultCorpus {
		if _, ok := PlainResult([]byte(s)); ok != plain[s] {
			t.Errorf("PlainResult(%s) = %v, want %v", s, ok, plain[s])
		}
	}
	if isErr, _ := PlainResult([]byte(resultCorpus[1])); !isErr {
		t.Errorf("isError not read from %s", resultCorpus[1])
	}
}

// AppendCanonical writes from the bytes exactly what decoding them
// (numbers as json.Number) and Marshal write, whatever the spacing, key
// order, duplicates and escapes; it refuses what does not decode.
func FuzzAppendCanonicalAgreesWithMarshal(f *testing.F) {
	for _, s := range canonicalCorpus {
		f.Add([]byte(s))
	}
	for _, s := range []string{" { \"b\" : [ 1 , 2 ] ,\n\"a\":{\"y\":1,\"x\":2}, \"a\":{\"z\":3}} ", `{"\u0061":1,"a":2}`, `{"s":"\ud83d\ude00\ud800\/"}`, `[ ]`, `{ }`, `"\u00e9"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := AppendCanonical(nil, b)
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		derr := dec.Decode(&v)
		if derr == nil && len(bytes.Trim(b[dec.InputOffset():], " \t\r\n")) > 0 {
			derr = errNotOne // more after the value
		}
		if derr != nil {
			if ok {
				t.Fatalf("AppendCanonical(%q) = %q, but it does not decode: %v", b, got, derr)
			}
			return
		}
		want, err := json.Marshal(v)
		if err != nil {
			return
		}
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("AppendCanonical(%q) = %q, %v; Marshal gives %q", b, got, ok, want)
		}
	})
}
