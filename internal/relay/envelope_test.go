package relay

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		want      Message // compared on ID, Method, Name, Arguments, Meta, Result, Error
		fallback  bool
	}{
		{name: "call", msg: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"},"_meta":{"progressToken":"p"}}}`,
			want: Message{ID: []byte(`7`), Method: "tools/call", Name: "echo", Arguments: []byte(`{"message":"hi"}`), Meta: []byte(`{"progressToken":"p"}`)}},
		{name: "spaces and string id", msg: " {\n\"id\" : \"a-1\" , \"method\":\"tools/call\",\"params\":{ \"arguments\" : [1, {\"}\":\"{\"}] , \"name\":\"x\" },\"jsonrpc\":\"2.0\"} ",
			want: Message{ID: []byte(`"a-1"`), Method: "tools/call", Name: "x", Arguments: []byte(`[1, {"}":"{"}]`)}},
		{name: "no arguments", msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
			want: Message{ID: []byte(`1`), Method: "tools/call", Name: "x"}},
		{name: "response", msg: `{"jsonrpc":"2.0","id":"tg-3","result":{"content":[{"type":"text","text":"a\"b"}]}}`,
			want: Message{ID: []byte(`"tg-3"`), Result: []byte(`{"content":[{"type":"text","text":"a\"b"}]}`)}},
		{name: "error response", msg: `{"jsonrpc":"2.0","id":-4,"error":{"code":-32601,"message":"no"}}`,
			want: Message{ID: []byte(`-4`), Error: []byte(`{"code":-32601,"message":"no"}`)}},
		{name: "other method, params not read", msg: `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":2}}`,
			want: Message{Method: "notifications/progress"}},

		{name: "duplicate method", msg: `{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call","params":{"name":"x"}}`, fallback: true},
		{name: "duplicate name", msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`, fallback: true},
		{name: "duplicate arguments", msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{},"arguments":{"x":1}}}`, fallback: true},
		{name: "escaped key", msg: `{"jsonrpc":"2.0","id":1,"\u006dethod":"tools/call","params":{"name":"x"}}`, fallback: true},
		{name: "escaped params key", msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\u0061me":"x"}}`, fallback: true},
		{name: "escaped name", msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\u0065cho"}}`, fallback: true},
		{name: "escaped method", msg: `{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"x"}}`, fallback: true},
		{name: "unknown member", msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"extra":1}`, fallback: true},
		{name: "unknown params member", msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","task":{}}}`, fallback: true},
		{name: "no version", msg: `{"id":1,"method":"tools/call","params":{"name":"x"}}`, fallback: true},
		{name: "null id", msg: `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"x"}}`, fallback: true},
		{name: "call without id", msg: `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}`, fallback: true},
		{name: "invalid json", msg: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}`, fallback: true},
		{name: "trailing data", msg: `{"jsonrpc":"2.0","id":1,"method":"ping"} {}`, fallback: true},
		{name: "batch", msg: `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, fallback: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.msg))
			if tc.fallback {
				if !errors.Is(err, ErrFallback) {
					t.Fatalf("parsed %+v, want ErrFallback", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.ID, tc.want.ID) || got.Method != tc.want.Method || got.Name != tc.want.Name ||
				!bytes.Equal(got.Arguments, tc.want.Arguments) || !bytes.Equal(got.Meta, tc.want.Meta) ||
				!bytes.Equal(got.Result, tc.want.Result) || !bytes.Equal(got.Error, tc.want.Error) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// What Parse accepts, encoding/json reads the same way: the lean path and
// the SDK's never see two different messages.
func FuzzParseAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`,
		`{"jsonrpc":"2.0","id":"x","result":{"a":[1,2,{"b":"}"}]}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\u0061me":"x"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		m, err := Parse(msg)
		if err != nil {
			return
		}
		var std struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(msg, &std); err != nil {
			t.Fatalf("Parse accepted what encoding/json refuses: %v", err)
		}
		if !bytes.Equal(m.ID, std.ID) || m.Method != std.Method || !bytes.Equal(m.Result, std.Result) || !bytes.Equal(m.Error, std.Error) {
			t.Fatalf("Parse read %+v, encoding/json %+v", m, std)
		}
		if m.Method == "tools/call" {
			var p struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
				Meta      json.RawMessage `json:"_meta"`
			}
			if err := json.Unmarshal(std.Params, &p); err != nil {
				t.Fatalf("params: %v", err)
			}
			if m.Name != p.Name || !bytes.Equal(m.Arguments, p.Arguments) || !bytes.Equal(m.Meta, p.Meta) {
				t.Fatalf("Parse read params %q %q %q, encoding/json %q %q %q", m.Name, m.Arguments, m.Meta, p.Name, p.Arguments, p.Meta)
			}
		}
	})
}

func TestAppend(t *testing.T) {
	p := AppendCallParams(nil, "ec\"ho", []byte(`{"a":1}`), []byte(`{"progressToken":"t"}`))
	req := AppendRequest(nil, []byte(`"tg-1"`), "tools/call", p)
	if _, err := Parse(req); !errors.Is(err, ErrFallback) {
		t.Fatalf("%s: a name with an escape must take the SDK path (%v)", req, err)
	}
	var back map[string]any
	if err := json.Unmarshal(req, &back); err != nil {
		t.Fatalf("%s: %v", req, err)
	}
	if back["params"].(map[string]any)["name"] != `ec"ho` {
		t.Fatalf("%s", req)
	}
	resp := AppendResponse(nil, []byte(`5`), []byte(`{"content":[]}`), nil)
	if m, err := Parse(resp); err != nil || string(m.Result) != `{"content":[]}` || string(m.ID) != "5" {
		t.Fatalf("%s: %+v %v", resp, m, err)
	}
}
