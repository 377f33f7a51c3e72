package e2e

// End-to-end tests of the built-in filters (access_control, load_control,
// rego_policy) and of a user's own extension built as a separate module
// (examples/audit-extension), through the real binary and npm servers.

import (
	"bufio"
	"encoding/json"
	"go/parser"
	"go/token"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// searchResult is search_tools' structured result.
type searchResult struct {
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
	DiscoveryToken string `json:"discovery_token"`
}

func searchFull(t *testing.T, cs *mcp.ClientSession, query string, topK int) (names []string, token string) {
	t.Helper()
	res := call(t, cs, "search_tools", map[string]any{"query": query, "top_k": topK})
	if res.IsError {
		t.Fatalf("search_tools %q: %s", query, text(res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out searchResult
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	for _, tl := range out.Tools {
		names = append(names, tl.Name)
	}
	return names, out.DiscoveryToken
}

func withPrefix(names []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

func matching(names []string, substr string) []string {
	var out []string
	for _, n := range names {
		if strings.Contains(n, substr) {
			out = append(out, n)
		}
	}
	return out
}

// replicas starts one unfiltered gateway and one with the given filters,
// both over HTTP and sharing a state directory, hence the key that signs
// discovery tokens: a stateless client can search the unfiltered one and
// present the token to the filtered one. That gets a call for a tool the
// filtered gateway never surfaced past the discovery gate, so what refuses
// it there is the filter itself.
func replicas(t *testing.T, filters map[string]any) (open, guarded *gatewayProc) {
	t.Helper()
	state := t.TempDir()
	servers := defaultServers(t)
	open = startHTTP(t, writeConfig(t, servers, nil), "--state-dir", state)
	guarded = startHTTP(t, writeConfig(t, servers, filters), "--state-dir", state)
	return open, guarded
}

func callWithToken(t *testing.T, cs *mcp.ClientSession, tool, token string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	return call(t, cs, "call_tool", map[string]any{"tool_name": tool, "arguments": args, "discovery_token": token})
}

// harmless are memory tools that can be called without changing anything.
var harmless = map[string]map[string]any{
	"memory__read_graph":   {},
	"memory__search_nodes": {"query": "nothing"},
	"memory__open_nodes":   {"names": []string{"nothing"}},
}

// proveCallTimeRefusal calls tool on the guarded gateway with a discovery
// token from the unfiltered one and wants a refusal naming rule; then it
// calls a permitted tool from the same token, which must succeed, showing
// the token passes the gate and the refusal was the filter's.
func proveCallTimeRefusal(t *testing.T, open, guarded *gatewayProc, query, tool, rule string, permitted func(string) bool) {
	t.Helper()
	// "" negotiates the newest protocol revision: stateless, with tokens.
	oc, gc := connectHTTP(t, open.URL, ""), connectHTTP(t, guarded.URL, "")
	names, token := searchFull(t, oc, query, 20)
	if !slices.Contains(names, tool) || token == "" {
		t.Fatalf("unfiltered search %q = %v (token %q); want %s and a token", query, names, token, tool)
	}
	res := callWithToken(t, gc, tool, token, map[string]any{})
	if !res.IsError || !strings.Contains(text(res), "refused by "+rule+":") {
		t.Fatalf("call %s with a valid discovery token: want a refusal by %s, got isError=%v: %s", tool, rule, res.IsError, text(res))
	}
	for _, n := range names {
		args, ok := harmless[n]
		if !ok || !permitted(n) {
			continue
		}
		if res := callWithToken(t, gc, n, token, args); res.IsError {
			t.Fatalf("call %s with the same token: %s", n, text(res))
		}
		return
	}
	t.Fatalf("no harmless permitted tool in %v to show the token passes the gate", names)
}

// refusedByName checks that a stateful client calling tool by name, without
// having found it, is refused.
func refusedByName(t *testing.T, g *gatewayProc, query, tool string) {
	t.Helper()
	cs := connectHTTP(t, g.URL, "2025-11-25")
	if got := search(t, cs, query, 20); slices.Contains(got, tool) {
		t.Fatalf("search %q on the filtered gateway returned %s", query, tool)
	}
	res := call(t, cs, "call_tool", map[string]any{"tool_name": tool, "arguments": map[string]any{}})
	if !res.IsError {
		t.Fatalf("call %s by name: not refused: %s", tool, text(res))
	}
}

func TestAccessControlDenyPatterns(t *testing.T) {
	open, guarded := replicas(t, map[string]any{
		"access_control": map[string]any{"deny_patterns": []string{"*__delete_*"}},
	})
	const query = "delete entities, relations and observations from the knowledge graph"

	// The unfiltered gateway ranks the delete tools for this query; the
	// filtered one hides them and still fills top_k with other tools: the
	// filter runs before truncation, so hidden tools take no result slot.
	all := search(t, connectHTTP(t, open.URL, "2025-11-25"), query, 20)
	deletes := matching(all, "__delete_")
	if len(deletes) < 3 {
		t.Fatalf("unfiltered search = %v; want memory's three delete tools", all)
	}
	const topK = 3
	got := search(t, connectHTTP(t, guarded.URL, "2025-11-25"), query, topK)
	if d := matching(got, "__delete_"); len(d) > 0 {
		t.Fatalf("filtered search returned %v, which deny_patterns hides", d)
	}
	if len(got) != topK {
		t.Fatalf("filtered search returned %v; want %d results (hidden tools must not take slots)", got, topK)
	}

	refusedByName(t, guarded, query, deletes[0])
	proveCallTimeRefusal(t, open, guarded, query, deletes[0], "access_control.deny_patterns",
		func(n string) bool { return !strings.Contains(n, "__delete_") })
}

func TestAccessControlAllowServers(t *testing.T) {
	open, guarded := replicas(t, map[string]any{
		"access_control": map[string]any{"allow_servers": []string{"everything", "filesystem"}},
	})
	const query = "read the knowledge graph and search its nodes"
	all := search(t, connectHTTP(t, open.URL, "2025-11-25"), query, 20)
	if len(withPrefix(all, "memory__")) == 0 {
		t.Fatalf("unfiltered search = %v; want memory tools", all)
	}
	got := search(t, connectHTTP(t, guarded.URL, "2025-11-25"), query, 20)
	if m := withPrefix(got, "memory__"); len(m) > 0 {
		t.Fatalf("filtered search returned %v from a server outside allow_servers", m)
	}
	refusedByName(t, guarded, query, "memory__read_graph")

	// At call time, a memory tool is refused even past the gate; an
	// everything tool from the same token goes through.
	oc, gc := connectHTTP(t, open.URL, ""), connectHTTP(t, guarded.URL, "")
	names, token := searchFull(t, oc, "read the knowledge graph, or echo a message back", 20)
	if !slices.Contains(names, "memory__read_graph") || !slices.Contains(names, "everything__echo") {
		t.Fatalf("unfiltered search = %v; want memory__read_graph and everything__echo", names)
	}
	res := callWithToken(t, gc, "memory__read_graph", token, map[string]any{})
	if !res.IsError || !strings.Contains(text(res), "refused by access_control.allow_servers:") {
		t.Fatalf("call memory__read_graph with a valid token: want a refusal by access_control.allow_servers, got isError=%v: %s", res.IsError, text(res))
	}
	if res := callWithToken(t, gc, "everything__echo", token, map[string]any{"message": "allowed server"}); res.IsError || !strings.Contains(text(res), "allowed server") {
		t.Fatalf("call everything__echo with the same token: %s", text(res))
	}
}

// echoPolicy allows everything__echo unless its message contains
// "forbidden", and every other tool.
const echoPolicy = `package e2e.echo

default allow := false

allow if not forbidden

forbidden if {
	input.tool_name == "everything__echo"
	contains(lower(input.arguments.message), "forbidden")
}

deny_reason := "echoing that word is not allowed" if forbidden
`

func TestRegoPolicyArgumentShape(t *testing.T) {
	cfg := writeConfig(t, defaultServers(t), map[string]any{"rego_policy": "policies/echo.rego"})
	pol := filepath.Join(filepath.Dir(cfg), "policies", "echo.rego")
	if err := os.MkdirAll(filepath.Dir(pol), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pol, []byte(echoPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	cs, _ := startStdio(t, cfg)
	if got := search(t, cs, "echo a message back", 5); !slices.Contains(got, "everything__echo") {
		t.Fatalf("search = %v", got)
	}
	args := func(msg string) map[string]any {
		return map[string]any{"tool_name": "everything__echo", "arguments": map[string]any{"message": msg}}
	}
	res := call(t, cs, "call_tool", args("hello policy"))
	if res.IsError || !strings.Contains(text(res), "hello policy") {
		t.Fatalf("allowed shape: isError=%v: %s", res.IsError, text(res))
	}
	res = call(t, cs, "call_tool", args("say the Forbidden word"))
	want := "call_tool: everything__echo was refused by rego_policy: echoing that word is not allowed"
	if !res.IsError || text(res) != want {
		t.Fatalf("denied shape: isError=%v: %q, want %q", res.IsError, text(res), want)
	}
	// The same tool with the allowed shape still works afterwards.
	if res := call(t, cs, "call_tool", args("fine again")); res.IsError {
		t.Fatalf("allowed shape after a denial: %s", text(res))
	}
}

// TestFilterConfigErrorsStopStartup checks that a bad filter config or a
// policy that does not compile stops the gateway with a message that says
// where.
func TestFilterConfigErrorsStopStartup(t *testing.T) {
	tests := []struct {
		name    string
		filters map[string]any
		policy  string
		want    []string
	}{
		{"unknown access_control field", map[string]any{"access_control": map[string]any{"deny_pattern": []string{"x"}}}, "",
			[]string{"filters.access_control", `unknown field "deny_pattern"`}},
		{"bad url pattern", map[string]any{"load_control": map[string]any{"allow_url_patterns": []string{"github.com"}}}, "",
			[]string{"filters.load_control", "allow_url_patterns[0]"}},
		{"policy does not compile", map[string]any{"rego_policy": "bad.rego"}, "package bad\nallow if {\n",
			[]string{"extension dev.toolgate/rego_policy", "bad.rego", "rego_parse_error"}},
		{"policy without allow", map[string]any{"rego_policy": "bad.rego"}, "package bad\ndeny := true\n",
			[]string{"bad.rego", "defines no allow rule"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := writeConfig(t, map[string]any{"everything": stdioServer("everything")}, tt.filters)
			if tt.policy != "" {
				if err := os.WriteFile(filepath.Join(filepath.Dir(cfg), "bad.rego"), []byte(tt.policy), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			out, err := exec.Command(binPath, "tools", "--config", cfg, "--state-dir", t.TempDir()).CombinedOutput()
			if err == nil {
				t.Fatalf("toolgate started; want an error\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output does not contain %q:\n%s", w, out)
				}
			}
		})
	}
}

// countingListener accepts TCP connections and closes them at once,
// counting them.
func countingListener(t *testing.T) (port string, accepts *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepts = &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, accepts
}

func TestLoadControlRefusesBeforeConnecting(t *testing.T) {
	port, accepts := countingListener(t)
	cfg := writeConfig(t, map[string]any{"everything": stdioServer("everything")}, map[string]any{
		"load_control": map[string]any{
			"deny_name_patterns": []string{"evil*"},
			"deny_url_patterns":  []string{"http://*"},
			"allow_url_patterns": []string{"https://github.com/*", "https://localhost/*"},
			// The control load below goes to loopback.
			"deny_private_networks": false,
		},
	})
	cs, _ := startStdio(t, cfg)
	load := func(name, url string) *mcp.CallToolResult {
		return call(t, cs, "load_mcp_server", map[string]any{"server_name": name, "url": url})
	}
	at := "127.0.0.1:" + port
	for _, tt := range []struct{ name, url, rule string }{
		{"plain", "http://" + at + "/mcp", "load_control.deny_url_patterns"},
		{"plain-upper", "HTTP://" + at + "/mcp", "load_control.deny_url_patterns"},
		{"outside", "https://" + at + "/mcp", "load_control.allow_url_patterns"},
		{"userinfo", "https://github.com@" + at + "/mcp", "load_control.allow_url_patterns"},
		{"path", "https://" + at + "/https://github.com/mcp", "load_control.allow_url_patterns"},
		{"evil", "https://github.com/mcp", "load_control.deny_name_patterns"},
	} {
		res := load(tt.name, tt.url)
		if !res.IsError || !strings.Contains(text(res), "refused by "+tt.rule+":") {
			t.Errorf("load %s %s: want a refusal by %s, got isError=%v: %s", tt.name, tt.url, tt.rule, res.IsError, text(res))
		}
		if strings.Contains(text(res), "github.com/*") || strings.Contains(text(res), "http://*") {
			t.Errorf("refusal leaks the patterns: %s", text(res))
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := accepts.Load(); n != 0 {
		t.Fatalf("the listener accepted %d connection(s); refused loads must not connect", n)
	}

	// Control: a URL the filter admits does connect to the same listener
	// (and fails, as it speaks no TLS), so the zero above means something.
	res := load("local", "https://localhost:"+port+"/mcp")
	if !res.IsError || strings.Contains(text(res), "refused by") {
		t.Fatalf("admitted load: want a connection failure, got isError=%v: %s", res.IsError, text(res))
	}
	if accepts.Load() == 0 {
		t.Fatal("the admitted load did not reach the listener")
	}
}

// TestAuditExtensionModule builds examples/audit-extension, a separate Go
// module that adds its own call filter with cli.Main, and checks that the
// filter saw every call that passed the discovery gate, including one a
// later filter refused.
func TestAuditExtensionModule(t *testing.T) {
	src := filepath.Join(repoRoot, "examples", "audit-extension")
	checkPublicImports(t, src)

	// Built as its README says, with go.mod and go.sum as committed: a
	// stale go.mod (toolgate's dependencies moved on) fails here, as it
	// would for a user. -mod=readonly is explicit so a GOFLAGS in the
	// environment cannot hide it.
	bin := filepath.Join(t.TempDir(), "audit-toolgate")
	build := exec.Command("go", "build", "-mod=readonly", "-o", bin, ".")
	build.Dir = src
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the example extension module as its README says: %v\n%s", err, out)
	}

	cfg := writeConfig(t, defaultServers(t), map[string]any{"rego_policy": "echo.rego"})
	if err := os.WriteFile(filepath.Join(filepath.Dir(cfg), "echo.rego"), []byte(echoPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	auditLog := filepath.Join(t.TempDir(), "audit.jsonl")
	logs := &syncBuffer{}
	cmd := exec.Command(bin, "serve", "--config", cfg, "--state-dir", t.TempDir())
	cmd.Env = append(os.Environ(), "TOOLGATE_AUDIT_LOG="+auditLog)
	cmd.Stderr = logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := client.Connect(ctxT(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, logs)
	}
	defer func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs)
		}
	}()
	waitReady(t, logs)

	callTool := func(tool string, args map[string]any) *mcp.CallToolResult {
		return call(t, cs, "call_tool", map[string]any{"tool_name": tool, "arguments": args})
	}
	// Refused by the gate: never reaches the pipeline, so not audited.
	if res := callTool("everything__get-sum", map[string]any{"a": 1, "b": 2}); !res.IsError {
		t.Fatal("gate did not refuse an unsearched tool")
	}
	search(t, cs, "echo a message back", 5)
	search(t, cs, "add two numbers and return the sum", 5)
	want := []struct {
		tool  string
		args  map[string]any
		error bool
	}{
		{"everything__echo", map[string]any{"message": "secret one"}, false},
		{"everything__get-sum", map[string]any{"a": 2, "b": 3}, false},
		{"everything__echo", map[string]any{"message": "forbidden secret"}, true}, // refused by rego_policy after the audit
		{"everything__echo", map[string]any{"message": "secret three"}, false},
	}
	for _, w := range want {
		if res := callTool(w.tool, w.args); res.IsError != w.error {
			t.Fatalf("%s %v: isError=%v: %s", w.tool, w.args, res.IsError, text(res))
		}
	}
	cs.Close()

	f, err := os.Open(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "secret") {
			t.Errorf("audit line holds an argument value: %s", sc.Text())
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) != len(want) {
		t.Fatalf("audit log has %d lines, want %d (one per call past the gate):\n%v", len(lines), len(want), lines)
	}
	for i, w := range want {
		if lines[i]["tool_name"] != w.tool || lines[i]["server_name"] != "everything" {
			t.Errorf("line %d = %v, want tool %s", i, lines[i], w.tool)
		}
		var keys []string
		for k := range w.args {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b, _ := json.Marshal(lines[i]["argument_names"])
		if wb, _ := json.Marshal(keys); string(b) != string(wb) {
			t.Errorf("line %d argument_names = %s, want %s", i, b, wb)
		}
	}
}

// checkPublicImports fails if the example imports any toolgate package but
// the public ones.
func checkPublicImports(t *testing.T, dir string) {
	t.Helper()
	public := map[string]bool{
		"github.com/toolgate/toolgate/cli":            true,
		"github.com/toolgate/toolgate/extension":      true,
		"github.com/toolgate/toolgate/extensions/all": true,
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	for _, file := range files {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			if strings.Contains(first, ".") && !public[path] {
				t.Errorf("%s imports %s; the example may use only %v and the standard library", filepath.Base(file), path, public)
			}
		}
	}
}
