package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/toolgate/toolgate/extensions/all"
	"github.com/toolgate/toolgate/internal/audit"
)

// runCheck runs `config check` with args through the cobra command, as a
// user would, and returns what it printed and its error.
func runCheck(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newConfigCmd()
	var out, errb bytes.Buffer
	cmd.SetArgs(append([]string{"check"}, args...))
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	err := cmd.ExecuteContext(context.Background())
	return out.String() + errb.String(), err
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const okPolicy = "package toolgate.t\n\ndefault allow := false\n\nallow if input.tool != \"drop\"\n"

// scratch points TMPDIR and HOME at empty folders, so a test can see that
// check leaves nothing behind.
func scratch(t *testing.T) (tmp, home string) {
	tmp, home = t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv("HOME", home)
	return tmp, home
}

func TestConfigCheckGood(t *testing.T) {
	tmp, home := scratch(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := writeFiles(t, map[string]string{
		"config.json": `{"mcpServers": {
			"local": {"type": "stdio", "command": ` + jsonString(self) + `, "env": {"TOKEN": "$TG_CHECK_TOKEN"}},
			"remote": {"type": "sse", "url": "https://mcp.example.com/sse"},
			"off": {"command": "surely-not-a-command-xyz", "disabled": true}
		}, "filters": {"rego_policy": "policies/p.rego", "access_control": {"deny": ["*__drop"]}, "tool_poisoning": false}}`,
		".env":            "TG_CHECK_TOKEN=tok-abcdef123456\n",
		"policies/p.rego": okPolicy,
	})
	out, err := runCheck(t, "--config", filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"local", "stdio", "remote", "sse", "https://mcp.example.com/sse", "off", "disabled in the config",
		"rego_policy", "dev.toolgate/rego_policy", "access_control", "tool_poisoning", "off", "shadowing", "ok (default)", "no errors"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "tok-abcdef123456") {
		t.Errorf("output shows a secret:\n%s", out)
	}
	// Nothing was written: no state folder, no scratch folder left.
	if _, err := os.Stat(filepath.Join(home, ".local")); err == nil {
		t.Error("check created a state folder")
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("check left %d entries in TMPDIR", len(left))
	}
}

func TestConfigCheckReportsEveryError(t *testing.T) {
	scratch(t)
	dir := writeFiles(t, map[string]string{
		"config.json": `{"mcpServers": {
			"needs_var": {"command": "sh", "env": {"TOKEN": "$TG_CHECK_SURELY_UNSET"}},
			"no_cmd": {"command": "surely-not-a-command-xyz"},
			"no_cwd": {"command": "sh", "cwd": "missing-folder"},
			"fine": {"command": "sh"}
		}, "filters": {"rego_policy": "bad.rego", "acess_control": {}, "load_control": {"deny_name": []}}}`,
		"bad.rego": "package x\nallow if { input.x = }\n",
	})
	out, err := runCheck(t, "--config", filepath.Join(dir, "config.json"))
	if !errors.Is(err, errCheckFailed) {
		t.Fatalf("err = %v, want errCheckFailed\n%s", err, out)
	}
	for _, want := range []string{
		"server needs_var: env.TOKEN: variable $TG_CHECK_SURELY_UNSET is not set",
		`server no_cmd: command "surely-not-a-command-xyz" is not on PATH`,
		"server no_cwd: cwd " + filepath.Join(dir, "missing-folder") + " is not a folder",
		"filter rego_policy: provision: compile bad.rego",
		`filter acess_control: unknown filter key "acess_control" (did you mean "access_control"?)`,
		`filter load_control: unknown field "deny_name" (did you mean "deny_names"?)`,
		"6 errors",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "server fine:") {
		t.Errorf("a good server is reported:\n%s", out)
	}

	// The same as JSON.
	out, err = runCheck(t, "--config", filepath.Join(dir, "config.json"), "--json")
	if !errors.Is(err, errCheckFailed) {
		t.Fatalf("--json: err = %v", err)
	}
	var rep checkReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output is not one JSON report: %v\n%s", err, out)
	}
	states := map[string]string{}
	for _, s := range rep.Servers {
		states[s.Name] = s.State
	}
	for _, f := range rep.Filters {
		states["filter "+f.Key] = f.State
	}
	for name, want := range map[string]string{"needs_var": "error", "no_cmd": "error", "no_cwd": "error", "fine": "ok",
		"filter rego_policy": "error", "filter acess_control": "error", "filter load_control": "error", "filter shadowing": "ok"} {
		if states[name] != want {
			t.Errorf("%s: state %q, want %q", name, states[name], want)
		}
	}
	if rep.Errors != 6 || rep.Config != filepath.Join(dir, "config.json") {
		t.Errorf("errors %d config %q", rep.Errors, rep.Config)
	}
}

func TestConfigCheckFileErrors(t *testing.T) {
	scratch(t)
	dir := writeFiles(t, map[string]string{
		"typo.json": `{"mcpServers": {"a": {"comand": "x"}}}`,
		"top.json":  `{"mcpServers": {}, "fliters": {}}`,
	})
	for file, want := range map[string]string{
		"typo.json": `mcpServers.a: unknown key "comand" (did you mean "command"?)`,
		"top.json":  `unknown key "fliters" (did you mean "filters"?)`,
		"none.json": "none.json: read:",
	} {
		out, err := runCheck(t, "--config", filepath.Join(dir, file))
		if !errors.Is(err, errCheckFailed) || !strings.Contains(out, want) || !strings.Contains(out, "1 error") {
			t.Errorf("%s: err %v, output:\n%s\nwant %q", file, err, out, want)
		}
		out, _ = runCheck(t, "--config", filepath.Join(dir, file), "--json")
		var rep checkReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Errors != 1 || !strings.Contains(rep.Error, want) {
			t.Errorf("%s --json: %v %+v", file, err, rep)
		}
	}
}

// Files written by other MCP clients check as they load.
func TestConfigCheckOtherClients(t *testing.T) {
	scratch(t)
	t.Setenv("TG_TEST_GITHUB_TOKEN", "x")
	out, err := runCheck(t, "--config", filepath.Join("..", "internal", "config", "testdata", "clients", "claude_desktop_config.json"))
	// npx may be missing here; the point is the file loads.
	if err != nil && !strings.Contains(out, `command "npx" is not on PATH`) {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "ignored settings of other MCP clients: globalShortcut, isUsingBuiltInNodeForMcp, preferences") {
		t.Errorf("output:\n%s", out)
	}
	out, _ = runCheck(t, "--config", filepath.Join("..", "internal", "config", "testdata", "clients", "vscode_mcp.json"))
	for _, want := range []string{`servers read from "servers"`, "server perplexity: env.PERPLEXITY_API_KEY: ${input:perplexity-key} is a VS Code prompt"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestConfigCheckUsage(t *testing.T) {
	if _, err := runCheck(t, "extra"); err == nil || !strings.Contains(err.Error(), "unknown command") && !strings.Contains(err.Error(), "accepts 0 arg") {
		t.Errorf("extra argument: %v", err)
	}
	if _, err := runCheck(t, "--bogus"); err == nil || !strings.Contains(err.Error(), "--bogus") {
		t.Errorf("unknown flag: %v", err)
	}
	if _, err := runCheck(t, "--config", "x.json", "--log-level", "loud"); err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Errorf("bad log level: %v", err)
	}
	out, err := runCheck(t, "--help")
	if err != nil || !strings.Contains(out, "--json") || !strings.Contains(out, "--config") {
		t.Errorf("--help: %v\n%s", err, out)
	}
}

// Through Run, as the binary runs it: exit 1 on errors, 0 when clean.
func TestRunConfigCheckExitCode(t *testing.T) {
	scratch(t)
	dir := writeFiles(t, map[string]string{
		"good.json": `{"mcpServers": {"r": {"url": "https://h.example/mcp"}}}`,
		"bad.json":  `{"mcpServers": {"r": {"url": "https://h.example/mcp", "headers": {"A": "$TG_CHECK_SURELY_UNSET"}}}}`,
	})
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"config", "check", "--config", filepath.Join(dir, "good.json")}, &out, &errb); code != 0 {
		t.Errorf("good: exit %d\n%s%s", code, out.String(), errb.String())
	}
	if code := Run(context.Background(), []string{"config", "check", "--config", filepath.Join(dir, "bad.json")}, &out, &errb); code != 1 {
		t.Errorf("bad: exit %d\n%s%s", code, out.String(), errb.String())
	}
}

// test-server NAME does not start a server that is disabled for an unset
// variable: it would get the literal "$VAR" text.
func TestTestServerRefusesDisabledServer(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"config.json": `{"mcpServers": {"needs": {"command": "sh", "env": {"T": "$TG_CHECK_SURELY_UNSET"}}}}`,
	})
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"test-server", "--config", filepath.Join(dir, "config.json"), "needs"}, &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), `server "needs" is disabled: env.T: variable $TG_CHECK_SURELY_UNSET is not set`) {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// policy generate from a VS Code mcp.json keeps the servers the session
// used (read from "servers"), written as toolgate's "mcpServers".
func TestPolicyGenerateFromVSCodeFile(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"mcp.json": `{"inputs": [], "servers": {"gh": {"type": "stdio", "command": "gh-mcp", "env": {"T": "$TG_GH_TOKEN"}}, "other": {"command": "x"}},
			"audit": {"path": "audit.jsonl"}}`,
	})
	log, err := audit.Open(filepath.Join(dir, "audit.jsonl"), audit.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := log.Append(audit.Event{Type: audit.ToolCallIntercepted, Session: "s1", Server: "gh", Tool: "list", Action: "allow"}); err != nil {
		t.Fatal(err)
	}
	log.Close()
	out := filepath.Join(dir, "locked.json")
	var stdout, stderr bytes.Buffer
	if code := Run(context.Background(), []string{"policy", "generate", "--config", filepath.Join(dir, "mcp.json"), "--session", "s1", "--output", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var locked struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &locked); err != nil {
		t.Fatal(err)
	}
	if len(locked.MCPServers) != 1 || !strings.Contains(string(locked.MCPServers["gh"]), "$TG_GH_TOKEN") {
		t.Fatalf("locked servers: %s", b)
	}
}

// A secret substituted into a url (Claude Code's "${VAR}" in url) is not
// printed by servers or config check.
func TestURLVariableSecretNotPrinted(t *testing.T) {
	scratch(t)
	const secret = "zk-9f8e7d6c5b4a3921"
	dir := writeFiles(t, map[string]string{
		"config.json": `{"mcpServers": {"zap": {"type": "http", "url": "https://mcp.example.com/api/${ZAP_API_KEY}/mcp"}}}`,
		".env":        "ZAP_API_KEY=" + secret + "\n",
	})
	cfg := filepath.Join(dir, "config.json")
	for _, args := range [][]string{{"servers", "--config", cfg, "--state-dir", t.TempDir()}, {"config", "check", "--config", cfg}, {"config", "check", "--config", cfg, "--json"}} {
		var out, errb bytes.Buffer
		code := Run(context.Background(), args, &out, &errb)
		if code != 0 || !strings.Contains(out.String(), "zap") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out.String(), errb.String())
		}
		if strings.Contains(out.String()+errb.String(), secret) {
			t.Errorf("%v printed the secret:\n%s%s", args, out.String(), errb.String())
		}
	}
}

func TestConfigCheckEgress(t *testing.T) {
	scratch(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := writeFiles(t, map[string]string{
		"config.json": `{"mcpServers": {
			"watched": {"command": ` + jsonString(self) + `, "egress": {"mode": "monitor", "allow": ["api.example.com:443"]}},
			"jailed": {"command": ` + jsonString(self) + `, "egress": {"allow": []}},
			"free": {"command": ` + jsonString(self) + `}
		}}`,
	})
	out, err := runCheck(t, "--config", filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"ok, egress monitor", "ok, egress enforce"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "free ") && strings.Contains(l, "egress") {
			t.Errorf("a server without egress shows one: %q", l)
		}
	}

	dir = writeFiles(t, map[string]string{"config.json": `{"mcpServers": {}, "filters": {"egres": {}}}`})
	out, _ = runCheck(t, "--config", filepath.Join(dir, "config.json"))
	if !strings.Contains(out, `did you mean "egress"?`) {
		t.Errorf("a misspelt egress key: %s", out)
	}
}
