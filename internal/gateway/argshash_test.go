package gateway

import (
	"testing"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
)

// argsCorpus are arguments as clients send them: canonical ones (which the
// hash takes from the bytes) and ones that need decoding.
var argsCorpus = []struct {
	raw   string
	bytes bool // hashed from the bytes, not decoded
}{
	{`{"message":"hi"}`, true},
	{`{}`, true},
	{``, true},
	{`null`, true},
	{`{"a":[1,2.50,-0,1e400,12345678901234567890123],"b":{"c":null,"d":true},"e":"\u003c\u0026\u2028 é\n"}`, true},
	{`{"path":"/tmp/a.txt","n":3}`, false},              // keys out of order
	{`{"message": "hi"}`, false},                        // a space
	{`{"a":1,"a":2}`, false},                            // a duplicate key: decodes to its last value
	{`{"\u0061":1}`, false},                             // an escaped key
	{`{"s":"\u0041\/<>&"}`, false},                      // escapes Marshal does not write, HTML characters
	{"{\"s\":\"\xff\u2028\"}", false},                   // invalid UTF-8, a raw U+2028
	{`{"s":"\ud83d\ude00"}`, false},                     // a surrogate pair
	{`{"a":{"z":1,"b":2}}`, false},                      // nested keys out of order
	{`[1,2]`, false},                                    // not an object: the decode path says so
	{`{"a":1}  `, false},                                // trailing space
	{`{"a":1}{"b":2}`, false},                           // two values
	{`{"x":[{"k":"v","j":1}]}`, false},                  // keys out of order in an array
	{`{"big":123456789012345678901234567890e-5}`, true}, // a number as it is (json.Number)
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
