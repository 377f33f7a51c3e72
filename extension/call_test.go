package extension

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Arguments are forwarded as received while nothing decodes them; once a
// filter decodes them, what is forwarded is the encoding of what it saw,
// so the gateway never judges one parse and forwards another.
func TestArgumentsForwarding(t *testing.T) {
	raw := json.RawMessage(`{"b": 1, "a": "x", "a": "y"}`)
	req := (&CallRequest{ToolName: "s__t"}).WithRawArguments(raw)
	if got, _ := req.ArgumentsJSON(); string(got) != string(raw) {
		t.Fatalf("undecoded arguments forwarded as %s, want the bytes received", got)
	}
	args, err := req.Arguments()
	if err != nil || args["a"] != "y" {
		t.Fatalf("Arguments = %v, %v", args, err)
	}
	if got, _ := req.ArgumentsJSON(); string(got) != `{"a":"y","b":1}` {
		t.Fatalf("decoded arguments forwarded as %s, want the encoding of what filters saw", got)
	}
	rw := req.WithArguments(map[string]any{"a": "z"})
	if got, _ := rw.ArgumentsJSON(); string(got) != `{"a":"z"}` {
		t.Fatalf("rewritten arguments forwarded as %s", got)
	}
	if orig, _ := req.Arguments(); orig["a"] != "y" {
		t.Fatalf("WithArguments changed the original request: %v", orig)
	}
	for _, bad := range []string{`[1]`, `"x"`, `{"a":`, `{} {}`} {
		r := (&CallRequest{}).WithRawArguments(json.RawMessage(bad))
		if _, err := r.Arguments(); err == nil {
			t.Errorf("arguments %s accepted", bad)
		}
		if _, err := r.ArgumentsJSON(); err == nil {
			t.Errorf("arguments %s forwarded after a failed decode", bad)
		}
	}
	if got, _ := (&CallRequest{}).WithRawArguments(nil).ArgumentsJSON(); string(got) != "{}" {
		t.Errorf("no arguments forwarded as %s", got)
	}
}

func TestResultDecodedLazily(t *testing.T) {
	r := RawCallResult(json.RawMessage(`{"content":[{"type":"text","text":"hi"}],"isError":true}`))
	res, err := r.Result()
	if err != nil || !res.IsError || res.Content[0].(*mcp.TextContent).Text != "hi" {
		t.Fatalf("Result = %+v, %v", res, err)
	}
	if _, err := RawCallResult(json.RawMessage(`{"content":`)).Result(); err == nil {
		t.Error("a malformed result decoded")
	}
	after := After(func(_ context.Context, _ *CallRequest, res *mcp.CallToolResult) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "edited"}}}, nil
	})
	h := after(func(context.Context, *CallRequest) (*CallResult, error) { return r, nil })
	out, err := h(context.Background(), &CallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := out.JSON(); !strings.Contains(string(b), "edited") {
		t.Errorf("edited result %s", b)
	}
}

func TestCheckMethod(t *testing.T) {
	handler := func(context.Context, *struct{ mcp.ParamsBase }) (*mcp.CallToolResult, error) { return nil, nil }
	for _, tc := range []struct {
		name, wantErr string
	}{
		{"com.example/stats", ""},
		{"tools/call", "defined by MCP"},
		{"tasks/get", "defined by MCP"},
		{"sampling/createMessage", "defined by MCP"},
		{"notifications/whatever", "defined by MCP"},
		{"stats", "name it"},
		{"", "no name"},
	} {
		err := CheckMethod(NewMethod(tc.name, nil, handler))
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("CheckMethod(%q) = %v, want %q", tc.name, err, tc.wantErr)
		}
	}
	if err := CheckMethod(Method{Name: "com.example/x"}); err == nil {
		t.Error("a Method not built by NewMethod accepted")
	}
}

func TestNamesAndHash(t *testing.T) {
	if s, tl, ok := Split("a__b__c"); !ok || s != "a" || tl != "b__c" || Qualify(s, tl) != "a__b__c" {
		t.Errorf("Split = %q %q %v", s, tl, ok)
	}
	for _, bad := range []string{"ab", "__b", "a__"} {
		if _, _, ok := Split(bad); ok {
			t.Errorf("Split(%q) ok", bad)
		}
	}
	d := &mcp.Tool{Name: "t", Description: "d", InputSchema: map[string]any{"type": "object", "b": 1, "a": 2}}
	if h := DefinitionHash(d); len(h) != 64 || h != DefinitionHash(&mcp.Tool{Name: "t", Description: "d", InputSchema: map[string]any{"a": 2, "type": "object", "b": 1}}) {
		t.Errorf("hash %q depends on key order", h)
	}
	if Name("dev.toolgate/rate_limits") != "rate_limits" {
		t.Error("Name")
	}
}

func TestRegisterDeprecated(t *testing.T) {
	type cfg struct {
		N int `json:"n"`
	}
	Register("test_new_name", func(c cfg) (Extension, error) { return nil, nil })
	RegisterDeprecated("test_old_name", "test_new_name")
	if _, renamed, ok := LookupName("test_old_name"); !ok || renamed != "test_new_name" {
		t.Fatalf("LookupName(old) = %q, %v", renamed, ok)
	}
	if _, renamed, ok := LookupName("test_new_name"); !ok || renamed != "" {
		t.Fatalf("LookupName(new) = %q, %v", renamed, ok)
	}
	for _, k := range Keys() {
		if k == "test_old_name" {
			t.Error("a deprecated key is listed")
		}
	}
}
