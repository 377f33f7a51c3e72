package config

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Files as Claude Desktop, Claude Code, Cursor and VS Code write them load
// as they are.
func TestOtherClientsFilesLoad(t *testing.T) {
	t.Setenv("TG_TEST_GITHUB_TOKEN", "gh-token")
	t.Setenv("TG_TEST_API_KEY", "api-key")
	t.Setenv("TG_TEST_PGPASSWORD", "pg-pass")
	type want struct {
		transport, url string
		disabled       string // part of DisabledReason; "" for an enabled server
	}
	tests := []struct {
		file       string
		serversKey string
		ignored    []string
		servers    map[string]want
	}{
		{"claude_desktop_config.json", "mcpServers", []string{"globalShortcut", "isUsingBuiltInNodeForMcp", "preferences"}, map[string]want{
			"filesystem": {transport: TransportStdio},
			"github":     {transport: TransportStdio},
		}},
		{"claude_code.mcp.json", "mcpServers", nil, map[string]want{
			"everything": {transport: TransportStdio},
			"api":        {transport: TransportStreamableHTTP, url: "https://api.example.com/mcp"},
			"legacy":     {transport: TransportSSE, url: "https://legacy.example.com/sse"},
		}},
		{"cursor_mcp.json", "mcpServers", nil, map[string]want{
			"postgres": {transport: TransportStdio},
			"remote":   {transport: TransportStreamableHTTP, url: "https://mcp.example.com/mcp"},
		}},
		{"vscode_mcp.json", "servers", []string{"inputs"}, map[string]want{
			"fetch":      {transport: TransportStdio},
			"perplexity": {transport: TransportStdio, disabled: "${input:perplexity-key} is a VS Code prompt"},
			"github":     {transport: TransportStreamableHTTP, url: "https://api.githubcopilot.com/mcp/"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			cfg, err := Load(filepath.Join("testdata", "clients", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ServersKey != tt.serversKey || !slices.Equal(cfg.Ignored, tt.ignored) {
				t.Errorf("servers key %q ignored %v, want %q %v", cfg.ServersKey, cfg.Ignored, tt.serversKey, tt.ignored)
			}
			if len(cfg.Servers) != len(tt.servers) {
				t.Errorf("%d servers, want %d", len(cfg.Servers), len(tt.servers))
			}
			for name, w := range tt.servers {
				s := cfg.Servers[name]
				if s == nil {
					t.Errorf("server %s missing", name)
					continue
				}
				if s.Transport != w.transport || s.URL != w.url {
					t.Errorf("%s: transport %q url %q, want %q %q", name, s.Transport, s.URL, w.transport, w.url)
				}
				if w.disabled == "" && s.Disabled || w.disabled != "" && (!s.Disabled || !strings.Contains(s.DisabledReason, w.disabled)) {
					t.Errorf("%s: disabled %v (%q), want reason %q", name, s.Disabled, s.DisabledReason, w.disabled)
				}
			}
		})
	}
	// The variables resolved, in every syntax.
	cfg, err := Load(filepath.Join("testdata", "clients", "claude_code.mcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Servers["api"].Headers["Authorization"]; got != "Bearer api-key" {
		t.Errorf("Authorization = %q", got)
	}
	cfg, err = Load(filepath.Join("testdata", "clients", "cursor_mcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Servers["postgres"].Env["PGPASSWORD"]; got != "pg-pass" {
		t.Errorf("PGPASSWORD = %q", got)
	}
}

func TestServerType(t *testing.T) {
	tests := []struct {
		server, transport, err string
	}{
		{`{"type":"stdio","command":"x"}`, TransportStdio, ""},
		{`{"type":"http","url":"https://h/mcp"}`, TransportStreamableHTTP, ""},
		{`{"type":"streamable-http","url":"https://h/mcp"}`, TransportStreamableHTTP, ""},
		{`{"type":"sse","url":"https://h/sse"}`, TransportSSE, ""},
		{`{"type":"sse","transport":"sse","url":"https://h/sse"}`, TransportSSE, ""},
		{`{"type":"http","transport":"streamable-http","url":"https://h/mcp"}`, TransportStreamableHTTP, ""},
		{`{"type":"stdio","transport":"stdio","command":"x"}`, TransportStdio, ""},
		{`{"type":"sse","transport":"streamable-http","url":"https://h/sse"}`, "", `"type": "sse" and "transport": "streamable-http" disagree`},
		{`{"type":"http","transport":"sse","url":"https://h/sse"}`, "", `"type": "http" and "transport": "sse" disagree`},
		{`{"type":"stdio","url":"https://h/mcp"}`, "", `"type": "stdio" needs "command"`},
		{`{"type":"http","command":"x"}`, "", `"type": "http" needs "url"`},
		{`{"type":"sse","command":"x"}`, "", `"type": "sse" needs "url"`},
		{`{"type":"websocket","url":"https://h/mcp"}`, "", `unknown type "websocket"`},
	}
	for _, tt := range tests {
		cfg, err := Parse([]byte(`{"mcpServers":{"a":`+tt.server+`}}`), "/etc/tg/config.json", nil)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "mcpServers.a") {
				t.Errorf("%s: error %v, want %q naming mcpServers.a", tt.server, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.server, err)
			continue
		}
		if got := cfg.Servers["a"].Transport; got != tt.transport {
			t.Errorf("%s: transport %q, want %q", tt.server, got, tt.transport)
		}
	}
}

func TestTopLevelKeysOfOtherClients(t *testing.T) {
	cfg, err := Parse([]byte(`{"globalShortcut":"Alt+Space","theme":"dark","mcpServers":{}}`), "c.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Ignored, []string{"globalShortcut", "theme"}) {
		t.Fatalf("ignored = %v", cfg.Ignored)
	}
	// Keys no client writes stay errors.
	for _, tt := range []struct{ json, want string }{
		{`{"mcpServers":{},"globalShortcuts":"x"}`, `unknown key "globalShortcuts" (did you mean "globalShortcut"?)`},
		{`{"mcpServers":{},"frobnicate":1}`, `unknown key "frobnicate"`},
		{`{"mcpServers":{},"servers":{}}`, `both "mcpServers" and "servers"`},
		{`{"servers":{"a":{"comand":"x"}}}`, `servers.a: unknown key "comand" (did you mean "command"?)`},
	} {
		_, err := Parse([]byte(tt.json), "c.json", nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.json, err, tt.want)
		}
	}
}

func TestUnknownKeyDidYouMean(t *testing.T) {
	for _, tt := range []struct{ json, want string }{
		{`{"mcpServers":{"a":{"comand":"x"}}}`, `unknown key "comand" (did you mean "command"?)`},
		{`{"mcpServers":{"a":{"command":"x","agrs":[]}}}`, `unknown key "agrs" (did you mean "args"?)`},
		{`{"mcpServers":{"a":{"url":"https://h/","header":{}}}}`, `unknown key "header" (did you mean "headers"?)`},
		{`{"mcpServers":{"a":{"command":"x","idle_timout":1}}}`, `(did you mean "idle_timeout"?)`},
		{`{"mcpServers":{}, "fliters":{}}`, `unknown key "fliters" (did you mean "filters"?)`},
		{`{"mcpServer":{}}`, `unknown key "mcpServer" (did you mean "mcpServers"?)`},
		{`{"mcpServers":{}, "pinned_tool":[]}`, `(did you mean "pinned_tools"?)`},
		{`{"mcpServers":{}, "search":{"mdoe":"lexical"}}`, `search: unknown key "mdoe" (did you mean "mode"?)`},
		{`{"mcpServers":{}, "search":{"model_dri":"m"}}`, `search: unknown key "model_dri" (did you mean "model_dir"?)`},
		{`{"mcpServers":{}, "audit":{"fsnyc":true}}`, `audit: unknown key "fsnyc" (did you mean "fsync"?)`},
		{`{"mcpServers":{}, "audit":{"recordarguments":true}}`, `audit: unknown key "recordarguments" (did you mean "record_arguments"?)`},
	} {
		_, err := Parse([]byte(tt.json), "c.json", nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.json, err, tt.want)
		}
	}
	// Nothing close: no guess.
	_, err := Parse([]byte(`{"mcpServers":{"a":{"command":"x","zzz":1}}}`), "c.json", nil)
	if err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("error %v: want no suggestion", err)
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"command", "args", "env", "url", "headers", "transport", "type"}
	for key, want := range map[string]string{
		"comand": "command", "commnad": "command", "COMMAND": "command", "arg": "args", "tpye": "type",
		"transprot": "transport", "xyz": "", "e": "", "environment": "",
	} {
		if got := Suggest(key, known); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", key, got, want)
		}
	}
}

// A variable that is not set disables only the server that uses it, with a
// reason naming the variable and where it is used; the others load.
func TestUnsetVariableDisablesOnlyItsServer(t *testing.T) {
	cfg, err := Parse([]byte(`{"mcpServers":{
		"good":{"command":"x","env":{"A":"$TG_DOT"}},
		"env":{"command":"x","env":{"B":"ok","T":"$TOOLGATE_TEST_UNSET_VAR"}},
		"header":{"url":"https://h/mcp","headers":{"X-Team":"team-${TOOLGATE_TEST_UNSET_TEAM}"}},
		"url":{"type":"http","url":"https://${TOOLGATE_TEST_UNSET_HOST}/mcp"},
		"off":{"command":"x","disabled":true,"env":{"T":"$TOOLGATE_TEST_UNSET_VAR"}}
	}}`), "/etc/tg/config.json", map[string]string{"TG_DOT": "v"})
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Servers["good"]; s.Disabled || s.Env["A"] != "v" {
		t.Errorf("good: %+v", s)
	}
	for name, want := range map[string]string{
		"env":    "env.T: variable $TOOLGATE_TEST_UNSET_VAR is not set",
		"header": "headers.X-Team: variable $TOOLGATE_TEST_UNSET_TEAM is not set",
		"url":    "url: variable $TOOLGATE_TEST_UNSET_HOST is not set",
	} {
		s := cfg.Servers[name]
		if !s.Disabled || !strings.Contains(s.DisabledReason, want) {
			t.Errorf("%s: disabled %v reason %q, want %q", name, s.Disabled, s.DisabledReason, want)
		}
	}
	// Nothing half-resolved is kept for a server that does not start.
	if got := cfg.Servers["env"].Env["B"]; got != "ok" {
		t.Errorf("env.B = %q", got)
	}
	if s := cfg.Servers["off"]; !s.Disabled || s.DisabledReason != "" {
		t.Errorf("off (disabled in the file): disabled %v reason %q", s.Disabled, s.DisabledReason)
	}
	// A server the file disables may have an unresolvable url.
	if _, err := Parse([]byte(`{"mcpServers":{"u":{"url":"https://${TOOLGATE_TEST_UNSET_HOST}/mcp","disabled":true}}}`), "c.json", nil); err != nil {
		t.Errorf("disabled server with an unset variable in its url: %v", err)
	}
	// A bad url is still an error once its variables resolve.
	_, err = Parse([]byte(`{"mcpServers":{"u":{"url":"ftp://${H}/"}}}`), "c.json", map[string]string{"H": "h"})
	if err == nil || !strings.Contains(err.Error(), "scheme must be http or https") {
		t.Errorf("bad url: %v", err)
	}
}

func TestExpandForms(t *testing.T) {
	lookup := func(n string) (string, bool) {
		v, ok := map[string]string{"SET": "v", "EMPTY": ""}[n]
		return v, ok
	}
	for in, want := range map[string]string{
		"$SET":                "v",
		"${SET}/x":            "v/x",
		"${env:SET}":          "v",
		"${UNSET:-dflt}":      "dflt",
		"${SET:-dflt}":        "v",
		"${EMPTY:-dflt}":      "dflt",
		"${UNSET:-}":          "",
		"${UNSET:-http://h/}": "http://h/",
		"cost $$5 and $$SET":  "cost $5 and $SET",
		"$5":                  "$5",
		"no vars":             "no vars",
		"a$SET${SET}b":        "avvb",
	} {
		got, err := Expand(in, lookup)
		if err != nil || got != want {
			t.Errorf("Expand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	_, err := Expand("x-${UNSET}", lookup)
	var unset *UnsetError
	if !errors.As(err, &unset) || unset.Name != "UNSET" {
		t.Errorf("unset: %v", err)
	}
	_, err = Expand("${env:UNSET}", lookup)
	if !errors.As(err, &unset) || unset.Name != "UNSET" {
		t.Errorf("env: unset: %v", err)
	}
	_, err = Expand("Bearer ${input:api-key}", lookup)
	var input *InputError
	if !errors.As(err, &input) || input.ID != "api-key" {
		t.Errorf("input: %v", err)
	}
}

// "namespace": false with its one server disabled for an unset variable is
// still the config the file means: it loads, and the server is reported.
func TestNamespaceFalseWithUnsetVariable(t *testing.T) {
	cfg, err := Parse([]byte(`{"mode":"passthrough","namespace":false,"mcpServers":{
		"gh":{"command":"x","env":{"T":"$TOOLGATE_TEST_UNSET_VAR"}},
		"old":{"command":"y","disabled":true}
	}}`), "c.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OnlyServer() != "gh" || !cfg.Servers["gh"].Disabled {
		t.Fatalf("only server %q, gh disabled %v", cfg.OnlyServer(), cfg.Servers["gh"].Disabled)
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"$A", "${A}", "${A:-d}", "${env:A}", "${input:x}", "$$A", "a$", "${", "${A:-", "$5", "${env:}", "${input:}"} {
		f.Add(s)
	}
	lookup := func(n string) (string, bool) {
		if n == "A" {
			return "v", true
		}
		return "", false
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := Expand(s, lookup)
		if err != nil {
			var unset *UnsetError
			var input *InputError
			if !errors.As(err, &unset) && !errors.As(err, &input) {
				t.Fatalf("Expand(%q): untyped error %v", s, err)
			}
			return
		}
		if !strings.Contains(s, "$") && out != s {
			t.Fatalf("Expand(%q) = %q without a variable", s, out)
		}
	})
}

// command and args expand the braced forms other clients write (Claude
// Code's .mcp.json: "args": ["--token", "${API_KEY}"]); a bare $NAME and $$
// are left for a shell the server may run.
func TestCommandAndArgsExpandBracedForms(t *testing.T) {
	cfg, err := Parse([]byte(`{"mcpServers":{
		"a":{"command":"${TG_BIN:-/usr/bin}/srv","args":["--token","${API_KEY}","--db","${env:DB}","-c","echo $HOME $$ $0","$${LITERAL}"]},
		"b":{"command":"srv","args":["${TOOLGATE_TEST_UNSET_ARG}"]}
	}}`), "/etc/tg/config.json", map[string]string{"API_KEY": "k-123", "DB": "db1"})
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Servers["a"]
	if a.Command != "/usr/bin/srv" || !slices.Equal(a.Args, []string{"--token", "k-123", "--db", "db1", "-c", "echo $HOME $$ $0", "${LITERAL}"}) {
		t.Errorf("a: command %q args %q", a.Command, a.Args)
	}
	if a.Vars["API_KEY"] != "k-123" || a.Vars["DB"] != "db1" {
		t.Errorf("a: vars %v", a.Vars)
	}
	if b := cfg.Servers["b"]; !b.Disabled || !strings.Contains(b.DisabledReason, "args[0]: variable $TOOLGATE_TEST_UNSET_ARG is not set") {
		t.Errorf("b: disabled %v reason %q", b.Disabled, b.DisabledReason)
	}
}

func TestEnvFile(t *testing.T) {
	cfg, err := Load(filepath.Join("testdata", "clients", "vscode_mcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	// env wins over the file on the same name.
	if env := cfg.Servers["fetch"].Env; env["FETCH_USER_AGENT"] != "toolgate-test" || env["FETCH_TIMEOUT"] != "30" {
		t.Errorf("fetch env = %v", env)
	}
	dir := t.TempDir()
	_, err = Parse([]byte(`{"mcpServers":{
		"missing":{"command":"x","envFile":"nope.env"},
		"unset":{"command":"x","envFile":"${workspaceFolder}/.env"},
		"remote":{"url":"https://h/mcp","envFile":"x.env"}
	}}`), filepath.Join(dir, "config.json"), nil)
	if err == nil || !strings.Contains(err.Error(), `"envFile"`) || !strings.Contains(err.Error(), "only apply to command servers") {
		t.Fatalf("envFile on a url server: %v", err)
	}
	cfg, err = Parse([]byte(`{"mcpServers":{
		"missing":{"command":"x","envFile":"nope.env"},
		"unset":{"command":"x","envFile":"${workspaceFolder}/.env"},
		"device":{"command":"x","envFile":"/dev/zero"}
	}}`), filepath.Join(dir, "config.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"missing": "envFile " + filepath.Join(dir, "nope.env") + ": no such file",
		"unset":   "envFile: variable $workspaceFolder is not set",
		"device":  "envFile /dev/zero: not a regular file",
	} {
		if s := cfg.Servers[name]; !s.Disabled || !strings.Contains(s.DisabledReason, want) {
			t.Errorf("%s: disabled %v reason %q, want %q", name, s.Disabled, s.DisabledReason, want)
		}
	}
}
