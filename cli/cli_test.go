package cli

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
)

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		r := runCLI(t, "", args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Available Commands:") || !strings.Contains(r.stdout, "search ") || !strings.Contains(r.stdout, "completion") {
			t.Errorf("%v: want the command list on stdout, got %v", args, r)
		}
	}
	for _, args := range [][]string{{"help", "search"}, {"search", "--help"}, {"search", "-h"}} {
		r := runCLI(t, "", args...)
		// One line per flag, each with its own usage text.
		if r.code != 0 || !regexp.MustCompile(`(?m)^\s+--top-k int\s+results to show`).MatchString(r.stdout) ||
			!regexp.MustCompile(`(?m)^\s+--json\s+print JSON`).MatchString(r.stdout) ||
			!regexp.MustCompile(`(?m)^\s+--config string\s+config file`).MatchString(r.stdout) {
			t.Errorf("%v: want search's usage with one line per flag, got %v", args, r)
		}
	}
	if r := runCLI(t, "", "help", "pins", "trust"); r.code != 0 || !strings.Contains(r.stdout, "--hash string") {
		t.Errorf("help pins trust: %v", r)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := runCLI(t, "", args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "toolgate ") || !strings.Contains(r.stdout, "commit ") || !strings.Contains(r.stdout, "built ") {
			t.Errorf("%v: %v", args, r)
		}
	}
	// Release builds stamp these with -ldflags -X.
	defer func(v, c, d string) { version, commit, date = v, c, d }(version, commit, date)
	version, commit, date = "v1.2.3", "0123abcd", "2026-01-02T03:04:05Z"
	r := runCLI(t, "", "version", "--json")
	var v versionInfo
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil || v.Version != "v1.2.3" || v.Commit != "0123abcd" || v.Date != "2026-01-02T03:04:05Z" {
		t.Fatalf("version --json with overrides: %v", r)
	}
	if r := runCLI(t, "", "--version"); !strings.Contains(r.stdout, "v1.2.3 (commit 0123abcd") {
		t.Fatalf("--version with overrides: %v", r)
	}
}

func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		r := runCLI(t, "", "completion", sh)
		if r.code != 0 || !strings.Contains(r.stdout, "toolgate") || len(r.stdout) < 500 {
			t.Errorf("completion %s: exit %d, %d bytes", sh, r.code, len(r.stdout))
		}
	}
}

// Every command refuses arguments it does not take, with exit status 2.
func TestExtraArguments(t *testing.T) {
	cfg := testConfig(t, nil, nil)
	state := t.TempDir()
	for _, args := range [][]string{
		{"serve", "--config", cfg, "extra"},
		{"tools", "--config", cfg, "extra"},
		{"index", "--config", cfg, "extra"},
		{"search", "--config", cfg, "read", "a", "file"},
		{"call", "--config", cfg, "fs__echo", "{}", "extra"},
		{"scan", "extra"},
		{"servers", "--config", cfg, "extra"},
		{"status", "extra"},
		{"events", "--state-dir", state, "extra"},
		{"calls", "--state-dir", state, "extra"},
		{"detections", "--state-dir", state, "extra"},
		{"audit", "verify", "--state-dir", state, "extra"},
		{"pins", "list", "--state-dir", state, "extra"},
		{"policy", "generate", "--config", cfg, "--session", "s", "--output", "-", "extra"},
		{"test-server", "--config", cfg, "fs", "extra"},
		{"version", "extra"},
		{"frobnicate"},
		{"pins", "frob"},
		{"audit"},
	} {
		r := runCLI(t, "", args...)
		if r.code != 2 || !strings.Contains(r.stderr, "--help' for usage") {
			t.Errorf("%v: want exit 2 with a usage hint, got %v", args, r)
		}
	}
	if r := runCLI(t, "", "serach"); !strings.Contains(r.stderr, `did you mean "search"`) {
		t.Errorf("a misspelt command gets no suggestion: %v", r)
	}
}

func TestInvalidFlagValuesListWhatIsValid(t *testing.T) {
	state := t.TempDir()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"events", "--severity", "extreme"}, "want low, medium, high or critical"},
		{[]string{"detections", "--severity", "HIGH"}, "want low, medium, high or critical"},
		{[]string{"calls", "--action", "deny"}, "want allow, block, alert, error or ok"},
		{[]string{"events", "--since", "1x"}, "want a duration such as"},
		{[]string{"events", "--since", "-1h"}, "want a duration such as"},
		{[]string{"tools", "--log-level", "loud"}, "want debug, info, warn or error"},
		{[]string{"scan", "--kind", "tool"}, "want definition or output"},
		{[]string{"test-server", "--url", "http://127.0.0.1:1/mcp", "--transport", "websocket"}, "want streamable-http or sse"},
		{[]string{"search", "--top-k", "many", "q"}, `invalid argument "many"`},
	} {
		r := runCLI(t, "", append(tt.args, "--state-dir", state)...)
		if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%v: want exit 2 and %q, got %v", tt.args, tt.want, r)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"1d": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour, "90m": 90 * time.Minute, "30s": 30 * time.Second, "0": 0,
	} {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "1w", "1.5d", "-2d", "1d-1h", "999999999d"} {
		if _, err := parseDuration(in); err == nil {
			t.Errorf("parseDuration(%q) accepted", in)
		}
	}
}

// writeAudit writes events to a fresh audit log in state and returns its path.
func writeAudit(t *testing.T, state string, events ...audit.Event) string {
	t.Helper()
	p := filepath.Join(state, "audit.jsonl")
	l, err := audit.Open(p, audit.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if err := l.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEventsSinceDays(t *testing.T) {
	state := t.TempDir()
	now := time.Now().UTC()
	writeAudit(t, state,
		audit.Event{Type: audit.Search, Time: now.Add(-72 * time.Hour), Session: "old-session"},
		audit.Event{Type: audit.Search, Time: now.Add(-time.Hour), Session: "new-session"},
	)
	r := runCLI(t, "", "events", "--state-dir", state, "--since", "2d")
	if r.code != 0 || !strings.Contains(r.stdout, "new-session") || strings.Contains(r.stdout, "old-session") {
		t.Fatalf("--since 2d: %v", r)
	}
	r = runCLI(t, "", "events", "--state-dir", state, "--since", "4d")
	if r.code != 0 || !strings.Contains(r.stdout, "old-session") {
		t.Fatalf("--since 4d: %v", r)
	}
}

func TestEventsShowFullSessionIDs(t *testing.T) {
	state := t.TempDir()
	sid := "http-4P7QK2ZR3M6TXA5WJ9N8C1VBEDFGHS0Y"
	writeAudit(t, state, audit.Event{Type: audit.ToolCallIntercepted, Session: sid, Server: "fs", Tool: "echo", Action: "allow"})
	r := runCLI(t, "", "events", "--state-dir", state)
	if r.code != 0 || !strings.Contains(r.stdout, sid) {
		t.Fatalf("events does not show the session id %s in full: %v", sid, r)
	}
}

// callDecision is an allowed call of fs__NAME in session sid.
func callDecision(sid, tool string) audit.Event {
	return audit.Event{Type: audit.ToolCallIntercepted, Session: sid, Server: "fs", Tool: tool, Action: "allow", Fields: map[string]any{"tool_hash": strings.Repeat("a", 64)}}
}

func TestPolicyGenerateSessionPrefix(t *testing.T) {
	cfg := testConfig(t, nil, nil)
	state := t.TempDir()
	writeAudit(t, state,
		callDecision("conn-aaaa1111", "echo"),
		callDecision("conn-aaaa2222", "read_file"),
		callDecision("conn-bbbb3333", "write_file"),
	)
	gen := func(session string) (result, map[string]any) {
		r := runCLI(t, "", "policy", "generate", "--config", cfg, "--state-dir", state, "--session", session, "--output", "-")
		var out map[string]any
		_ = json.Unmarshal([]byte(r.stdout), &out)
		return r, out
	}
	allowed := func(out map[string]any) any {
		return out["filters"].(map[string]any)["access_control"].(map[string]any)["allow"]
	}
	if r, out := gen("conn-bbbb"); r.code != 0 || len(allowed(out).([]any)) != 1 || allowed(out).([]any)[0] != "fs__write_file" {
		t.Fatalf("unique prefix: %v", r)
	}
	if r, out := gen("conn-aaaa2222"); r.code != 0 || allowed(out).([]any)[0] != "fs__read_file" {
		t.Fatalf("full id: %v", r)
	}
	if r, _ := gen("conn-aaaa"); r.code != 1 || !strings.Contains(r.stderr, "ambiguous") || !strings.Contains(r.stderr, "conn-aaaa1111") || !strings.Contains(r.stderr, "conn-aaaa2222") {
		t.Fatalf("ambiguous prefix: %v", r)
	}
	if r, _ := gen("conn-c"); r.code != 1 || !strings.Contains(r.stderr, `no session "conn-c"`) {
		t.Fatalf("unknown prefix: %v", r)
	}
	// A prefix filters events too.
	if r := runCLI(t, "", "events", "--state-dir", state, "--session", "conn-bb"); r.code != 0 || !strings.Contains(r.stdout, "fs__write_file") || strings.Contains(r.stdout, "fs__echo") {
		t.Fatalf("events --session prefix: %v", r)
	}
}

// A locked config written to another folder starts its stdio servers in
// the folder they ran in before, so relative commands and args still work.
func TestPolicyGenerateRelocatesRelativePaths(t *testing.T) {
	// A server run by a relative command with a relative argument, from a
	// subfolder of the config's folder.
	base := t.TempDir()
	bin := filepath.Join(base, "servers", "bin")
	if err := os.MkdirAll(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	exe, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "fs-server"), exe, 0o700); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(base, "servers", "started")
	cfgJSON := `{
  "mcpServers": {"fs": {"command": "./bin/fs-server", "args": ["-test.run=^$"], "cwd": "servers",
    "env": {"` + envTestServer + `": "1", "` + envMarker + `": "` + marker + `"}}},
  "search": {"mode": "lexical"}
}`
	cfg := filepath.Join(base, "config.json")
	if err := os.WriteFile(cfg, []byte(cfgJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	// The session to lock down: the operator's call, with the real hash.
	state := t.TempDir()
	if r := runCLI(t, "", "call", "--config", cfg, "--state-dir", state, "fs__echo", `{"message": "original"}`); r.code != 0 {
		t.Fatal(r)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	locked := filepath.Join(t.TempDir(), "elsewhere", "locked.json")
	if err := os.MkdirAll(filepath.Dir(locked), 0o700); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "", "policy", "generate", "--config", cfg, "--state-dir", state, "--session", "operator", "--output", locked); r.code != 0 {
		t.Fatal(r)
	}
	// The locked config, run from its new folder, starts the server and
	// calls its tool.
	r := runCLI(t, "", "call", "--config", locked, "--state-dir", t.TempDir(), "fs__echo", `{"message": "relocated"}`)
	if r.code != 0 || !strings.Contains(r.stdout, "echo: relocated") {
		t.Fatalf("the locked config does not run from its new folder: %v", r)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("server did not run in its original folder: %v", err)
	}
	// Relative where it can be, so the two folders can move together.
	b, _ := os.ReadFile(locked)
	var lc struct {
		MCPServers map[string]struct {
			Command string `json:"command"`
			Cwd     string `json:"cwd"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(b, &lc); err != nil {
		t.Fatal(err)
	}
	fs := lc.MCPServers["fs"]
	if fs.Command != "./bin/fs-server" || filepath.IsAbs(fs.Cwd) || filepath.Join(filepath.Dir(locked), fs.Cwd) != filepath.Join(base, "servers") {
		t.Errorf("locked server entry %+v, want cwd relative to %s naming %s", fs, filepath.Dir(locked), filepath.Join(base, "servers"))
	}
}

func TestServersMarksEarlierLoadsNotConnected(t *testing.T) {
	cfg := testConfig(t, nil, nil)
	state := t.TempDir()
	writeAudit(t, state, audit.Event{Type: audit.ServerLoaded, Session: "conn-1", Server: "weather", Action: "allow", Fields: map[string]any{"url": "https://weather.example/mcp", "tools": 3}})
	r := runCLI(t, "", "servers", "--config", cfg, "--state-dir", state)
	var line string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "weather ") {
			line = l
		}
	}
	if r.code != 0 || !strings.Contains(line, "not connected") {
		t.Fatalf("a server loaded in an earlier run is not marked not connected: %v", r)
	}
	r = runCLI(t, "", "servers", "--config", cfg, "--state-dir", state, "--json")
	var rows []serverRow
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rows) != nil || len(rows) != 2 {
		t.Fatalf("servers --json: %v", r)
	}
	if rows[0].Name != "fs" || rows[0].Source != "config" || rows[0].Transport != "stdio" ||
		rows[1].Name != "weather" || rows[1].Source != "loaded" || rows[1].State != notConnected {
		t.Fatalf("servers --json rows: %+v", rows)
	}
}

// Flags after the query are flags, not words of the query.
func TestSearchFlagsAfterQuery(t *testing.T) {
	cfg := testConfig(t, nil, nil)
	r := runCLI(t, "", "search", "--config", cfg, "--state-dir", t.TempDir(), "read a file", "--top-k", "1")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 1 || !strings.Contains(lines[0], "fs__read_file") {
		t.Fatalf("want exactly fs__read_file: %v", r)
	}
	r = runCLI(t, "", "search", "read a file", "--config", cfg, "--state-dir", t.TempDir(), "--json", "--top-k", "2")
	var out struct {
		Query   string      `json:"query"`
		Results []searchHit `json:"results"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || out.Query != "read a file" || len(out.Results) != 2 || out.Results[0].Name != "fs__read_file" || out.Results[0].Server != "fs" {
		t.Fatalf("search --json: %v", r)
	}
}

// One-off commands log warnings only by default; the upstream's stderr
// and the SDK's session chatter are debug.
func TestOneOffCommandsAreQuiet(t *testing.T) {
	cfg := testConfig(t, nil, nil)
	r := runCLI(t, "", "tools", "--config", cfg, "--state-dir", t.TempDir())
	if r.code != 0 || !strings.Contains(r.stdout, "fs__echo") || r.stderr != "" {
		t.Fatalf("tools: want the list and a quiet stderr, got %v", r)
	}
	r = runCLI(t, "", "tools", "--config", cfg, "--state-dir", t.TempDir(), "--log-level", "info")
	if r.code != 0 || !strings.Contains(r.stderr, "gateway ready") || strings.Contains(r.stderr, "cli-test-server: ready") {
		t.Fatalf("tools --log-level info: want info lines but not the server's stderr, got %v", r)
	}
	r = runCLI(t, "", "tools", "--config", cfg, "--state-dir", t.TempDir(), "--log-level", "debug")
	if r.code != 0 || !strings.Contains(r.stderr, "cli-test-server: ready") {
		t.Fatalf("tools --log-level debug: want the server's stderr, got %v", r)
	}
}

func TestCall(t *testing.T) {
	cfg := testConfig(t, map[string]any{"access_control": map[string]any{"deny": []string{"fs__write_file"}}}, nil)
	state := t.TempDir()
	r := runCLI(t, "", "call", "--config", cfg, "--state-dir", state, "fs__echo", `{"message": "hi there"}`)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "echo: hi there" {
		t.Fatalf("call: %v", r)
	}
	// Arguments from stdin, flags after the positionals, the whole result as JSON.
	r = runCLI(t, `{"path": "/tmp/x"}`, "call", "fs__read_file", "-", "--config", cfg, "--state-dir", state, "--json")
	var res struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil || res.IsError || len(res.Content) != 1 || res.Content[0].Text != "contents of /tmp/x" {
		t.Fatalf("call --json with stdin: %v", r)
	}
	// The filters run: a denied tool is refused, exit 1.
	r = runCLI(t, "", "call", "--config", cfg, "--state-dir", state, "fs__write_file", `{"path": "/etc/passwd"}`)
	if r.code != 1 || !strings.Contains(r.stdout, "refused by access_control") || strings.Contains(r.stdout, "wrote") {
		t.Fatalf("a denied call: %v", r)
	}
	// Bad input.
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"fs__echo", `["a"]`}, 2, "must be a JSON object"},
		{[]string{"fs__echo", `{"message":`}, 2, "not valid JSON"},
		{[]string{"fs__nope"}, 1, `no tool "fs__nope"`},
		{[]string{}, 2, "arg(s)"},
	} {
		r := runCLI(t, "", append([]string{"call", "--config", cfg, "--state-dir", state}, tt.args...)...)
		if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("call %v: want exit %d and %q, got %v", tt.args, tt.code, tt.want, r)
		}
	}
	// Each decision is in the audit log as the operator's.
	var decisions []audit.Event
	if err := audit.Read(filepath.Join(state, "audit.jsonl"), func(e *audit.Event) error {
		if e.Type == audit.ToolCallIntercepted {
			decisions = append(decisions, *e)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(decisions) != 3 {
		t.Fatalf("want 3 call decisions, got %+v", decisions)
	}
	for i, want := range []string{"allow", "allow", "block"} {
		d := decisions[i]
		if d.Action != want || d.Session != "operator" || d.Fields["operator"] != true {
			t.Errorf("decision %d: %+v, want %s by the operator", i, d, want)
		}
	}
	if r := runCLI(t, "", "audit", "verify", "--state-dir", state); r.code != 0 {
		t.Fatalf("audit verify: %v", r)
	}
}

func TestListenAddress(t *testing.T) {
	for in, want := range map[string]string{"8790": "127.0.0.1:8790", "127.0.0.1:0": "127.0.0.1:0", "[::1]:80": "[::1]:80", "localhost:1": "localhost:1", "0.0.0.0:9": "0.0.0.0:9"} {
		if got, err := listenAddress(in); err != nil || got != want {
			t.Errorf("listenAddress(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "localhost", "http://127.0.0.1:80", "127.0.0.1"} {
		if _, err := listenAddress(in); err == nil {
			t.Errorf("listenAddress(%q) accepted", in)
		}
	}
}

// serve --listen binds before any upstream starts, so a taken port is the
// error the user sees, and no server was started for nothing.
func TestServeBindsListenerFirst(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	marker := filepath.Join(t.TempDir(), "started")
	cfg := testConfig(t, nil, map[string]any{"env": map[string]string{envTestServer: "1", envMarker: marker}})
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, listen := range []string{ln.Addr().String(), port} {
		r := runCLI(t, "", "serve", "--config", cfg, "--state-dir", t.TempDir(), "--listen", listen)
		if r.code != 1 || !strings.Contains(r.stderr, "address already in use") {
			t.Fatalf("--listen %s on a taken port: %v", listen, r)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("--listen %s: an upstream was started before the listener was bound", listen)
		}
	}
}

func TestServeRefusesNonLoopbackWithoutFlag(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "started")
	cfg := testConfig(t, nil, map[string]any{"env": map[string]string{envTestServer: "1", envMarker: marker}})
	for _, listen := range []string{"0.0.0.0:0", ":0"} {
		r := runCLI(t, "", "serve", "--config", cfg, "--state-dir", t.TempDir(), "--listen", listen)
		if r.code != 2 || !strings.Contains(r.stderr, "not a loopback address") || !strings.Contains(r.stderr, "--insecure-no-auth") {
			t.Fatalf("--listen %s: %v", listen, r)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("--listen %s: an upstream was started", listen)
		}
	}
	// With the flag the address is bound (checked without serving).
	l, err := bindListener("0.0.0.0:0", true)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if l, err := bindListener("127.0.0.1:0", false); err != nil {
		t.Fatal(err)
	} else {
		l.Close()
	}
}

func TestTestServerArguments(t *testing.T) {
	cfg := testConfig(t, nil, nil)
	// The name before the flags.
	r := runCLI(t, "", "test-server", "fs", "--config", cfg, "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"ok": true`) || !strings.Contains(r.stdout, "read_file") {
		t.Fatalf("test-server NAME --config: %v", r)
	}
	// Everything after "--" is the command, flags included. The server's
	// environment is filtered, so a script sets the variable.
	script := filepath.Join(t.TempDir(), "server.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"+envTestServer+"=1 exec \""+os.Args[0]+"\" \"$@\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "", "test-server", "--timeout", "30s", "--", script, "-test.run=^$", "-test.v")
	if r.code != 0 || !strings.Contains(r.stdout, "ok, 4 tool(s)") {
		t.Fatalf("test-server -- COMMAND: %v", r)
	}
	for _, args := range [][]string{
		{"test-server", "--"},
		{"test-server", "fs", "--", "cmd"},
		{"test-server", "--url", "http://127.0.0.1:1/mcp", "fs"},
		{"test-server", "--config", cfg},
	} {
		if r := runCLI(t, "", args...); r.code != 2 {
			t.Errorf("%v: want exit 2, got %v", args, r)
		}
	}
}

// Shell completion offers an enum flag's values.
func TestCompletionOffersEnumValues(t *testing.T) {
	r := runCLI(t, "", "__complete", "events", "--severity", "")
	if r.code != 0 || !strings.Contains(r.stdout, "critical") || !strings.Contains(r.stdout, "medium") {
		t.Fatalf("completion of --severity: %v", r)
	}
}

func TestHelpUnknownTopic(t *testing.T) {
	if r := runCLI(t, "", "help", "serch"); r.code != 2 || !strings.Contains(r.stderr, `unknown command "serch"; did you mean "search"?`) {
		t.Fatalf("help of an unknown command: %v", r)
	}
}

// Earlier releases served when given flags alone; MCP client configs
// written for them keep working.
func TestFlagsWithoutCommandMeanServe(t *testing.T) {
	cfg := testConfig(t, nil, nil)
	r := runCLI(t, "", "--config", cfg, "--listen", "0.0.0.0:0")
	if r.code != 2 || !strings.HasPrefix(r.stderr, "toolgate serve: --listen 0.0.0.0:0 is not a loopback address") {
		t.Fatalf("flags without a command: %v", r)
	}
	if r := runCLI(t, "", "tools", "--no-such-flag"); r.code != 2 || !strings.Contains(r.stderr, "unknown flag: --no-such-flag") {
		t.Fatalf("unknown flag: %v", r)
	}
}

// With "auth" in the config a non-loopback --listen is allowed: the
// decision runServe passes to bindListener.
func TestServeNonLoopbackAllowedWithAuth(t *testing.T) {
	dir := t.TempDir()
	withAuth := filepath.Join(dir, "auth.json")
	hash := strings.Repeat("ab", 32)
	if err := os.WriteFile(withAuth, []byte(`{"mcpServers":{},"auth":{"api_keys":[{"principal":"a","sha256":"`+hash+`"}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	without := filepath.Join(dir, "plain.json")
	if err := os.WriteFile(without, []byte(`{"mcpServers":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if on, err := configHasAuth(&common{config: withAuth}); err != nil || !on {
		t.Fatalf("config with auth: %v %v", on, err)
	}
	if on, err := configHasAuth(&common{config: without}); err != nil || on {
		t.Fatalf("config without auth: %v %v", on, err)
	}
	r := runCLI(t, "", "serve", "--config", without, "--state-dir", t.TempDir(), "--listen", "0.0.0.0:0")
	if r.code != 2 || !strings.Contains(r.stderr, `configure \"auth\"`) && !strings.Contains(r.stderr, `Configure "auth"`) {
		t.Fatalf("refusal does not point at auth: %v", r)
	}
}
