package gateway

import (
	"testing"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
)

// argsCorpus are arguments as clients send them: in Marshal's encoding
// (hashed as they are), in any other (made canonical from the bytes), and
// ones that are not a JSON object (left to the decoding path, which says
// what is wrong).
var argsCorpus = []struct {
	raw   string
	bytes bool // hashed from the bytes, not decoded
}{
	{`{"message":"hi"}`, true},
	{`{}`, true},
	{``, true},
	{`null`, true},
	{`{"a":[1,2.50,-0,1e400,12345678901234567890123],"b":{"c":null,"d":true},"e":"\u003c\u0026\u2028 é\n"}`, true},
	{`{"path":"/tmp/a.txt","n":3}`, true},                            // keys out of order
	{" {\n  \"message\" : \"hi\" ,\t\"b\": [ 1 , { } ] }\r\n", true}, // spaces
	{`{"a":1,"a":2}`, true},                                          // a duplicate key: the last is kept
	{`{"a":{"x":1},"b":0,"a":{"y":2}}`, true},                        // not merged
	{`{"\u0061":1,"a":2,"b":3}`, true},                               // an escaped key, equal to another
	{`{"s":"\u0041\/<>&","\u00e9":"\u00e9"}`, true},                  // escapes Marshal does not write, HTML characters
	{"{\"s\":\"\xff\u2028\",\"\xfe\":1}", true},                      // invalid UTF-8, a raw U+2028
	{`{"s":"\ud83d\ude00 \ud800 \udc00x"}`, true},                    // a surrogate pair, lone surrogates
	{`{"a":{"z":1,"b":2}}`, true},                                    // nested keys out of order
	{`{"x":[{"k":"v","j":1}]}`, true},                                // keys out of order in an array
	{`{"é":1,"z":2,"Z":3,"":4}`, true},                               // byte order of keys
	{`{"big":123456789012345678901234567890e-5}`, true},              // a number as it is (json.Number)
	{`[1,2]`, false},                                                 // not an object
	{`"text"`, false},                                                // not an object
	{`{"a":1}{"b":2}`, false},                                        // two values
	{`{"a":}`, false},                                                // not JSON
	{`{"a":1`, false},                                                // cut short
}

// The hash taken from the bytes is the hash of the decoding path
// (argsFieldOf over the decoded arguments), and the bytes path is taken
// for canonical arguments.
func TestRawArgumentsHashMatchesDecoded(t *testing.T) {
	g := &Gateway{cfg: &config.Config{}}
	for _, c := range argsCorpus {
		req := (&extension.CallRequest{}).WithRawArguments([]byte(c.raw))
		h, ok := g.rawArgumentsHash(req)
		if ok != c.bytes {
			t.Errorf("%q: hashed from the bytes: %v, want %v", c.raw, ok, c.bytes)
		}
		if !ok {
			continue
		}
		if want := decodedArgsHash(g, c.raw); h != want {
			t.Errorf("%q: hash from the bytes %s, decoded %s", c.raw, h, want)
		}
	}
	// Recording the arguments themselves, or arguments a middleware
	// rewrote, take the decoding path.
	if _, ok := (&Gateway{cfg: &config.Config{Audit: config.Audit{RecordArguments: true}}}).rawArgumentsHash((&extension.CallRequest{}).WithRawArguments([]byte(`{}`))); ok {
		t.Error("record_arguments: hashed from the bytes")
	}
	if _, ok := g.rawArgumentsHash((&extension.CallRequest{}).WithArguments(map[string]any{})); ok {
		t.Error("rewritten arguments: hashed from the bytes")
	}
}

func decodedArgsHash(g *Gateway, raw string) string {
	args := (&extension.CallRequest{}).WithRawArguments([]byte(raw)).Args()
	if args == nil {
		args = map[string]any{}
	}
	_, v := g.argsFieldOf(args)
	return v.(string)
}

// Whatever the bytes, a hash taken from them is the decoding path's.
func FuzzRawArgumentsHash(f *testing.F) {
	for _, c := range argsCorpus {
		f.Add([]byte(c.raw))
	}
	g := &Gateway{cfg: &config.Config{}}
	f.Fuzz(func(t *testing.T, raw []byte) {
		h, ok := g.rawArgumentsHash((&extension.CallRequest{}).WithRawArguments(raw))
		if !ok {
			return
		}
		if want := decodedArgsHash(g, string(raw)); h != want {
			t.Fatalf("%q: hash from the bytes %s, decoded %s", raw, h, want)
		}
	})
}
