package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestBrokenServersAreSkipped(t *testing.T) {
	t.Parallel()
	servers := everythingOnly()
	servers["nosuchcmd"] = map[string]any{"command": filepath.Join(t.TempDir(), "does-not-exist")}
	servers["exits3"] = map[string]any{"command": "sh", "args": []string{"-c", "exit 3"}}
	servers["notmcp"] = map[string]any{"command": "sh", "args": []string{"-c", "echo this is not json-rpc; sleep 1"}}
	cs, logs := startStdio(t, coreConfig(t, servers))

	for _, name := range []string{"nosuchcmd", "exits3", "notmcp"} {
		re := regexp.MustCompile(`(?m)^.*level=WARN.*skipping server.*server=` + name + `\b.*$`)
		if !re.MatchString(logs.String()) {
			t.Errorf("no warning naming %q in the logs:\n%s", name, logs)
		}
	}
	if got := search(t, cs, "echo a message back", 5); !slices.Contains(got, "everything__echo") {
		t.Fatalf("search = %v, want everything__echo", got)
	}
	wantOK(t, "the working server", callTool(t, cs, "everything__echo", map[string]any{"message": "still here"}), "still here")
	for _, name := range []string{"nosuchcmd", "exits3", "notmcp"} {
		wantRefused(t, name+"'s tool", callTool(t, cs, name+"__anything", map[string]any{}), "search_tools")
	}
	noPanic(t, logs.String())
}

// runToolgate runs toolgate to completion with stdin empty and returns its
// exit code and stderr.
func runToolgate(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.CommandContext(ctxT(t), binPath, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), env...)
	err := cmd.Run()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("run toolgate: %v", err)
		}
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

func TestBadConfigs(t *testing.T) {
	t.Parallel()
	echo := npmServer("everything")
	cases := []struct {
		name string
		json string
		env  []string
		want []string // each must appear in stderr
	}{
		{
			name: "malformed JSON",
			json: "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}\n",
			want: []string{"line 3"},
		},
		{
			name: "truncated JSON",
			json: "{\n  \"mcpServers\": {\n",
			want: []string{"unexpected end"},
		},
		{
			name: "not an object",
			json: "[1, 2]",
			want: []string{"want a JSON object"},
		},
		{
			name: "server entry not an object",
			json: `{"mcpServers": {"a": "npx"}}`,
			want: []string{"mcpServers.a", "want a JSON object"},
		},
		{
			name: "neither command nor url",
			json: `{"mcpServers": {"empty": {"env": {"A": "b"}}}}`,
			want: []string{"mcpServers.empty", `"command"`, `"url"`},
		},
		{
			name: "both command and url",
			json: `{"mcpServers": {"both": {"command": "x", "url": "http://127.0.0.1:1/mcp"}}}`,
			want: []string{"mcpServers.both", "not both"},
		},
		{
			name: "unknown server key",
			json: `{"mcpServers": {"a": {"command": "x", "comand": "y"}}}`,
			want: []string{`unknown key "comand" (did you mean "command"?)`, "mcpServers.a"},
		},
		{
			name: "unknown top-level key",
			json: `{"mcpServers": {}, "mcpServer": {}}`,
			want: []string{`unknown key "mcpServer"`},
		},
		{
			name: "unknown filter key",
			json: `{"mcpServers": {}, "filters": {"similarity_treshold": 0.5}, "search": {"mode": "lexical"}}`,
			want: []string{"similarity_treshold"},
		},
		{
			name: "type against command",
			json: `{"mcpServers": {"a": {"type": "sse", "command": "` + echo + `"}}}`,
			want: []string{"mcpServers.a", `"type": "sse" needs "url"`},
		},
		{
			name: "type against transport",
			json: `{"mcpServers": {"r": {"type": "http", "transport": "sse", "url": "http://127.0.0.1:1/mcp"}}}`,
			want: []string{"mcpServers.r", `"type": "http" and "transport": "sse" disagree`},
		},
		{
			name: "bad server name",
			json: `{"mcpServers": {"a__b": {"command": "x"}}}`,
			want: []string{`"a__b"`, "__"},
		},
		{
			name: "bad url scheme",
			json: `{"mcpServers": {"r": {"url": "file:///etc/passwd"}}}`,
			want: []string{"mcpServers.r", "scheme"},
		},
		{
			name: "threshold out of range",
			json: `{"mcpServers": {}, "filters": {"similarity_threshold": 2}}`,
			want: []string{"similarity_threshold"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "config.json")
			if err := os.WriteFile(p, []byte(c.json), 0o600); err != nil {
				t.Fatal(err)
			}
			code, stderr := runToolgate(t, c.env, "serve", "--config", p, "--state-dir", t.TempDir())
			if code == 0 {
				t.Fatalf("toolgate exited 0 on a bad config; stderr:\n%s", stderr)
			}
			for _, w := range append([]string{p}, c.want...) {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not name %q:\n%s", w, stderr)
				}
			}
			noPanic(t, stderr)
		})
	}

	// A variable set in .env beside the config resolves: the server is
	// not disabled and no warning names the variable.
	t.Run("variable from .env", func(t *testing.T) {
		dir := t.TempDir()
		p := filepath.Join(dir, "config.json")
		cfg := `{"mcpServers": {"a": {"command": "` + echo + `", "env": {"TOKEN": "$TOOLGATE_E2E_SURELY_UNSET"}}}, "search": {"mode": "lexical"}}`
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("TOOLGATE_E2E_SURELY_UNSET=ok\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, stderr := runToolgate(t, nil, "tools", "--config", p, "--state-dir", t.TempDir())
		if code != 0 || strings.Contains(stderr, "TOOLGATE_E2E_SURELY_UNSET") {
			t.Fatalf("exit %d; stderr:\n%s", code, stderr)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "nope.json")
		code, stderr := runToolgate(t, nil, "serve", "--config", p, "--state-dir", t.TempDir())
		if code == 0 || !strings.Contains(stderr, p) {
			t.Fatalf("exit %d; stderr does not name %s:\n%s", code, p, stderr)
		}
	})
}

func TestBadCallInput(t *testing.T) {
	t.Parallel()
	cs, logs := startStdio(t, coreConfig(t, everythingOnly()))
	if got := search(t, cs, "echo a message back", 1); !slices.Equal(got, []string{"everything__echo"}) {
		t.Fatalf("search = %v", got)
	}
	ct := func(args map[string]any) string {
		t.Helper()
		res := call(t, cs, "call_tool", args)
		if !res.IsError {
			t.Fatalf("call_tool %v: want isError, got %s", args, text(res))
		}
		return text(res)
	}
	wantIn := func(what, got string, subs ...string) {
		t.Helper()
		for _, s := range subs {
			if !strings.Contains(got, s) {
				t.Errorf("%s: %q does not mention %q", what, got, s)
			}
		}
	}
	// arguments that are not an object, for a tool that was searched.
	for _, bad := range []any{"x", []any{1}, 7, true} {
		got := ct(map[string]any{"tool_name": "everything__echo", "arguments": bad})
		wantIn("arguments "+strings.TrimSpace(strings.ReplaceAll(string(mustJSON(bad)), "\n", "")), got, `"arguments" must be a JSON object`)
	}
	// Unknown tool after search, on a known server and on an unknown one.
	wantIn("everything__nope", ct(map[string]any{"tool_name": "everything__nope", "arguments": map[string]any{}}), "everything__nope", "search_tools")
	wantIn("nosuch__echo", ct(map[string]any{"tool_name": "nosuch__echo", "arguments": map[string]any{}}), "nosuch__echo", "search_tools")
	// Missing, empty or mistyped tool_name.
	wantIn("missing tool_name", ct(map[string]any{"arguments": map[string]any{"message": "x"}}), "search_tools")
	wantIn("empty tool_name", ct(map[string]any{"tool_name": ""}), "search_tools")
	wantIn("numeric tool_name", ct(map[string]any{"tool_name": 12}), `"tool_name" must be a string`)
	wantIn("misspelt field", ct(map[string]any{"tool_nam": "everything__echo"}), "tool_nam")
	// Upstream argument validation is the upstream's: a wrong type comes
	// back as the upstream's error, still isError.
	res := callTool(t, cs, "everything__echo", map[string]any{"message": 5})
	if !res.IsError {
		t.Errorf("echo with a numeric message: want the upstream's isError, got %s", text(res))
	}

	st := func(args map[string]any, subs ...string) {
		t.Helper()
		res := call(t, cs, "search_tools", args)
		wantRefused(t, "search_tools "+string(mustJSON(args)), res, subs...)
	}
	st(map[string]any{"query": ""}, `"query" is empty`)
	st(map[string]any{"query": "   \t\n"}, `"query" is empty`)
	st(map[string]any{}, `"query" is empty`)
	st(map[string]any{"query": "echo", "top_k": 0}, "top_k", "between 1 and")
	st(map[string]any{"query": "echo", "top_k": -3}, "top_k", "between 1 and")
	st(map[string]any{"query": "echo", "top_k": 51}, "top_k", "between 1 and")
	st(map[string]any{"query": "echo", "top_k": 1 << 40}, "top_k")
	st(map[string]any{"query": "echo", "top_k": 2.5}, "top_k")
	st(map[string]any{"query": "echo", "top_k": "5"}, "top_k")
	st(map[string]any{"query": 5}, "query")
	st(map[string]any{"query": "echo", "k": 5}, `"k"`)

	// Limits are inclusive.
	if got := search(t, cs, "echo", 50); len(got) == 0 {
		t.Error("top_k 50 returned nothing")
	}
	// The gateway is still healthy.
	wantOK(t, "echo after the bad input", callTool(t, cs, "everything__echo", map[string]any{"message": "fine"}), "fine")
	noPanic(t, logs.String())
}
