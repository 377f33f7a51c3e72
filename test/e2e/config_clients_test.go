package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestConfigUnsetVariableDisablesOneServer: a variable that is not set in
// one server's env or headers disables that server, with a warning naming
// the variable and the server; the other servers serve. `config check`
// reports it as an error.
func TestConfigUnsetVariableDisablesOneServer(t *testing.T) {
	t.Parallel()
	servers := everythingOnly()
	servers["needs_token"] = map[string]any{"command": npmServer("everything"), "env": map[string]any{"TOKEN": "$TOOLGATE_E2E_SURELY_UNSET"}}
	servers["needs_team"] = map[string]any{"url": "http://127.0.0.1:1/mcp", "headers": map[string]any{"X-Team": "team-${TOOLGATE_E2E_NO_TEAM}"}}
	cfg := coreConfig(t, servers)
	cs, logs := startStdio(t, cfg)

	if got := search(t, cs, "echo a message back", 5); !slices.Contains(got, "everything__echo") {
		t.Fatalf("search = %v, want everything__echo", got)
	}
	wantOK(t, "the server with its variables", callTool(t, cs, "everything__echo", map[string]any{"message": "still here"}), "still here")
	wantRefused(t, "the disabled server's tool", callTool(t, cs, "needs_token__echo", map[string]any{"message": "x"}), "search_tools")
	for name, parts := range map[string][]string{
		"needs_token": {"env.TOKEN", "$TOOLGATE_E2E_SURELY_UNSET"},
		"needs_team":  {"headers.X-Team", "$TOOLGATE_E2E_NO_TEAM"},
	} {
		re := regexp.MustCompile(`(?m)^.*level=WARN.*server disabled.*server=` + name + `\b.*$`)
		line := re.FindString(logs.String())
		if line == "" {
			t.Errorf("no warning naming %s in the logs:\n%s", name, logs)
			continue
		}
		for _, p := range parts {
			if !strings.Contains(line, p) {
				t.Errorf("warning for %s does not name %q: %s", name, p, line)
			}
		}
	}
	noPanic(t, logs.String())

	out, code := runToolgateOut(t, nil, "config", "check", "--config", cfg)
	if code != 1 || !strings.Contains(out, "error server needs_token: env.TOKEN: variable $TOOLGATE_E2E_SURELY_UNSET is not set") ||
		!strings.Contains(out, "error server needs_team: headers.X-Team") || !strings.Contains(out, "2 errors") {
		t.Errorf("config check: exit %d\n%s", code, out)
	}
	// With the variables set, the same config checks clean.
	out, code = runToolgateOut(t, []string{"TOOLGATE_E2E_SURELY_UNSET=x", "TOOLGATE_E2E_NO_TEAM=y"}, "config", "check", "--config", cfg, "--json")
	var rep struct {
		Errors  int `json:"errors"`
		Servers []struct {
			Name, Transport, State string
		} `json:"servers"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || rep.Errors != 0 || len(rep.Servers) != 3 {
		t.Errorf("config check --json with the variables set: exit %d, %v\n%s", code, err, out)
	}
}

// TestConfigFromOtherClients: a whole claude_desktop_config.json (with
// Claude Desktop's own settings and Claude Code's "type") and a VS Code
// mcp.json serve as they are.
func TestConfigFromOtherClients(t *testing.T) {
	t.Parallel()
	everything := npmServer("everything")
	files := map[string]string{
		"claude_desktop_config.json": `{
  "globalShortcut": "Ctrl+Space",
  "preferences": {"menuBarEnabled": false},
  "mcpServers": {
    "everything": {"type": "stdio", "command": ` + jsonQuote(everything) + `, "args": [], "env": {}}
  },
  "search": {"mode": "lexical"}
}`,
		"mcp.json": `{
  "inputs": [{"type": "promptString", "id": "key", "description": "API key", "password": true}],
  "servers": {
    "everything": {"type": "stdio", "command": ` + jsonQuote(everything) + `},
    "keyed": {"type": "stdio", "command": ` + jsonQuote(everything) + `, "env": {"KEY": "${input:key}"}}
  },
  "search": {"mode": "lexical"}
}`,
	}
	for name, body := range files {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			cs, logs := startStdio(t, p)
			if got := search(t, cs, "echo a message back", 5); !slices.Contains(got, "everything__echo") {
				t.Fatalf("search = %v, want everything__echo", got)
			}
			wantOK(t, "echo", callTool(t, cs, "everything__echo", map[string]any{"message": "from " + name}), "from "+name)
			if n := strings.Count(logs.String(), "ignoring settings of other MCP clients"); n != 1 {
				t.Errorf("%d info lines about ignored keys, want 1:\n%s", n, logs)
			}
			if name == "mcp.json" && !regexp.MustCompile(`level=WARN.*server disabled.*server=keyed.*input:key`).MatchString(logs.String()) {
				t.Errorf("no warning about keyed's ${input:key}:\n%s", logs)
			}
			noPanic(t, logs.String())
		})
	}
}

// runToolgateOut runs toolgate to completion and returns stdout and
// stderr together, and the exit code.
func runToolgateOut(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctxT(t), binPath, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("run toolgate: %v", err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
