package e2e

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestHTTPStatefulSearchThenCall(t *testing.T) {
	t.Parallel()
	g := startHTTP(t, coreConfig(t, everythingOnly()))
	cs := connectHTTP(t, g.URL, "2025-11-25")
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("negotiated %q, want 2025-11-25", v)
	}
	if cs.ID() == "" {
		t.Fatal("stateful session has no Mcp-Session-Id")
	}
	tools, err := cs.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if want := []string{"call_tool", "load_mcp_server", "search_tools"}; !slices.Equal(names, want) {
		t.Fatalf("tools/list = %v, want exactly %v", names, want)
	}

	wantRefused(t, "call before search", callTool(t, cs, "everything__echo", map[string]any{"message": "hi"}), "search_tools")

	if got := search(t, cs, "echo a message back", 5); !slices.Contains(got, "everything__echo") {
		t.Fatalf("search for echo = %v, want everything__echo", got)
	}
	wantOK(t, "call after search", callTool(t, cs, "everything__echo", map[string]any{"message": "over http"}), "over http")
	noPanic(t, g.Logs.String())
}

func TestHTTPSessionsHaveSeparateGates(t *testing.T) {
	t.Parallel()
	g := startHTTP(t, coreConfig(t, everythingOnly()))
	a := connectHTTP(t, g.URL, "2025-11-25")
	b := connectHTTP(t, g.URL, "2025-11-25")
	if a.ID() == "" || a.ID() == b.ID() {
		t.Fatalf("session ids %q and %q: want two distinct sessions", a.ID(), b.ID())
	}
	args := map[string]any{"a": 2, "b": 3}

	if got := search(t, a, "add two numbers sum", 3); !slices.Contains(got, "everything__get-sum") {
		t.Fatalf("search in A = %v, want everything__get-sum", got)
	}
	wantOK(t, "A after its search", callTool(t, a, "everything__get-sum", args), "5")

	// B has not searched: A's search must not open B's gate.
	wantRefused(t, "B before its own search", callTool(t, b, "everything__get-sum", args), "search_tools")
	// A third session that connects after A searched starts closed too.
	c := connectHTTP(t, g.URL, "2025-11-25")
	wantRefused(t, "C, new after A's search", callTool(t, c, "everything__get-sum", args), "search_tools")

	if got := search(t, b, "add two numbers sum", 3); !slices.Contains(got, "everything__get-sum") {
		t.Fatalf("search in B = %v, want everything__get-sum", got)
	}
	wantOK(t, "B after its search", callTool(t, b, "everything__get-sum", args), "5")
	// B's search does not leak into C either.
	wantRefused(t, "C after B's search", callTool(t, c, "everything__get-sum", args), "search_tools")
	noPanic(t, g.Logs.String())
}

// discoveryToken returns the discovery_token of a stateless search_tools
// result, failing if there is none.
func discoveryToken(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res.IsError {
		t.Fatalf("search_tools failed: %s", text(res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out struct {
		Token string `json:"discovery_token"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Token == "" {
		t.Fatalf("search_tools structuredContent %s has no discovery_token", b)
	}
	if !strings.Contains(text(res), out.Token) {
		t.Errorf("the text of search_tools does not carry the discovery_token:\n%s", text(res))
	}
	return out.Token
}

func TestHTTPStatelessDiscoveryToken(t *testing.T) {
	t.Parallel()
	g := startHTTP(t, coreConfig(t, everythingOnly()))
	cs := connectHTTP(t, g.URL, "")
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("SDK client negotiated %q, want the stateless revision 2026-07-28", v)
	}
	if cs.ID() != "" {
		t.Fatalf("stateless client has a session id %q", cs.ID())
	}
	echo := func(extra map[string]any) *mcp.CallToolResult {
		args := map[string]any{"tool_name": "everything__echo", "arguments": map[string]any{"message": "stateless hi"}}
		for k, v := range extra {
			args[k] = v
		}
		return call(t, cs, "call_tool", args)
	}

	wantRefused(t, "no token, before search", echo(nil), "no discovery token")

	res := call(t, cs, "search_tools", map[string]any{"query": "echo a message back", "top_k": 1})
	if got := found(t, res); !slices.Equal(got, []string{"everything__echo"}) {
		t.Fatalf("search for echo (top_k 1) = %v, want [everything__echo]", got)
	}
	tok := discoveryToken(t, res)

	// Stateless: having searched does not help a call without the token.
	wantRefused(t, "no token, after search", echo(nil), "no discovery token")
	wantRefused(t, "empty token", echo(map[string]any{"discovery_token": ""}), "no discovery token")
	wantOK(t, "with the token", echo(map[string]any{"discovery_token": tok}), "stateless hi")
	// The token is reusable within its lifetime.
	wantOK(t, "with the token again", echo(map[string]any{"discovery_token": tok}), "stateless hi")

	// A token for echo does not cover get-sum.
	sum := func(token string) *mcp.CallToolResult {
		return call(t, cs, "call_tool", map[string]any{"tool_name": "everything__get-sum", "arguments": map[string]any{"a": 2, "b": 3}, "discovery_token": token})
	}
	wantRefused(t, "echo's token for get-sum", sum(tok), "does not cover")

	body, sig, ok := strings.Cut(tok, ".")
	if !ok {
		t.Fatalf("token %q is not body.signature", tok)
	}
	// Tampering: flip a character of the body, of the signature; drop the
	// signature; garbage.
	flip := func(s string, i int) string {
		c := byte('A')
		if s[i] == 'A' {
			c = 'B'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	for name, bad := range map[string]string{
		"body tampered":      flip(body, len(body)/2) + "." + sig,
		"signature tampered": body + "." + flip(sig, 3),
		"no signature":       body,
		"empty signature":    body + ".",
		"garbage":            "not-a-token",
		"token twice":        tok + tok,
	} {
		wantRefused(t, name, echo(map[string]any{"discovery_token": bad}), "not issued by this gateway")
	}

	// Splice get-sum into the claims and keep the original signature.
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		t.Fatalf("token body is not base64url: %v", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatalf("token claims %s: %v", raw, err)
	}
	var listKey string
	for k, v := range claims {
		if l, ok := v.([]any); ok && slices.Contains(l, any("everything__echo")) {
			listKey = k
		}
	}
	if listKey == "" {
		t.Fatalf("cannot find the tool list in claims %s", raw)
	}
	claims[listKey] = append(claims[listKey].([]any), "everything__get-sum")
	spliced, _ := json.Marshal(claims)
	splicedTok := base64.RawURLEncoding.EncodeToString(spliced) + "." + sig
	wantRefused(t, "spliced token for get-sum", sum(splicedTok), "not issued by this gateway")
	wantRefused(t, "spliced token for echo", echo(map[string]any{"discovery_token": splicedTok}), "not issued by this gateway")
	// Extending the expiry is tampering too.
	for k, v := range claims {
		if _, ok := v.(float64); ok {
			claims[k] = v.(float64) + 86400*365
		}
	}
	claims[listKey] = []any{"everything__echo"}
	extended, _ := json.Marshal(claims)
	wantRefused(t, "expiry extended", echo(map[string]any{"discovery_token": base64.RawURLEncoding.EncodeToString(extended) + "." + sig}), "not issued by this gateway")

	// A token is not a session: a second stateless client can use it (no
	// principal configured), and its own search works as well.
	cs2 := connectHTTP(t, g.URL, "")
	res = call(t, cs2, "search_tools", map[string]any{"query": "add two numbers sum", "top_k": 1})
	if got := found(t, res); !slices.Equal(got, []string{"everything__get-sum"}) {
		t.Fatalf("search for sum (top_k 1) = %v", got)
	}
	wantOK(t, "get-sum with its own token", sum(discoveryToken(t, res)), "5")
	noPanic(t, g.Logs.String())
}
