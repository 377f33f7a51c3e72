package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"syntax", "{\n  \"mcpServers\": {,}\n}", "line 2 column"},
		{"empty", "", "empty file"},
		{"no servers", `{}`, `missing "mcpServers"`},
		{"unknown top key", `{"mcpServers":{}, "fliters":{}}`, `unknown key "fliters"`},
		{"unknown server key", `{"mcpServers":{"a":{"command":"x","argz":[]}}}`, `mcpServers.a: unknown key "argz"`},
		{"neither", `{"mcpServers":{"a":{}}}`, `missing "command"`},
		{"both", `{"mcpServers":{"a":{"command":"x","url":"https://h/mcp"}}}`, "not both"},
		{"bad name", `{"mcpServers":{"a__b":{"command":"x"}}}`, `contains "__"`},
		{"bad url", `{"mcpServers":{"a":{"url":"ftp://h/"}}}`, "scheme must be http or https"},
		{"bad transport", `{"mcpServers":{"a":{"url":"https://h/","transport":"ws"}}}`, `unknown transport "ws"`},
		{"args type", `{"mcpServers":{"a":{"command":"x","args":"y"}}}`, "args: want []string"},
		{"threshold type", `{"mcpServers":{},"filters":{"similarity_threshold":"high"}}`, "similarity_threshold: want a number"},
		{"threshold range", `{"mcpServers":{},"filters":{"similarity_threshold":2}}`, "outside [0, 1]"},
		{"trailing data", `{"mcpServers":{}} {}`, "unexpected data"},
		{"audit rotation", `{"mcpServers":{},"audit":{"max_size_mb":-1}}`, "audit: max_size_mb (-1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.json), "/etc/tg/config.json", nil)
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "/etc/tg/config.json") {
				t.Fatalf("error %q: want it to contain %q and the file name", err, tt.want)
			}
		})
	}
}

func TestParseResolves(t *testing.T) {
	t.Setenv("TG_FROM_ENV", "env-value")
	t.Setenv("TG_BOTH", "env-loses")
	data := `{"mcpServers":{
		"local":{"command":"srv","args":["a"],"env":{"A":"$TG_FROM_ENV","B":"${TG_BOTH}/x","C":"cost $$5"}},
		"remote":{"url":"https://example.com/mcp","headers":{"X-Key":"$TG_DOT"}}
	},"filters":{"similarity_threshold":0.5,"access_control":{"deny":["x"]}}}`
	cfg, err := Parse([]byte(data), "/srv/cfg/config.json", map[string]string{"TG_BOTH": "dotenv-wins", "TG_DOT": "k"})
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Servers["local"]
	if l.Env["A"] != "env-value" || l.Env["B"] != "dotenv-wins/x" || l.Env["C"] != "cost $5" {
		t.Fatalf("env = %v", l.Env)
	}
	if l.Transport != TransportStdio || l.Dir != "/srv/cfg" {
		t.Fatalf("transport %q dir %q", l.Transport, l.Dir)
	}
	r := cfg.Servers["remote"]
	if r.Transport != TransportStreamableHTTP || r.Headers["X-Key"] != "k" || !r.IsRemote() {
		t.Fatalf("remote = %+v", r)
	}
	if cfg.Filters.SimilarityThreshold != 0.5 || string(cfg.Filters.Extensions["access_control"]) != `{"deny":["x"]}` {
		t.Fatalf("filters = %+v", cfg.Filters)
	}
}

func TestLoadReadsDotEnvBesideConfig(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".env"), []byte("# comment\nexport TG_SECRET=\"s3cret\"\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"mcpServers":{"a":{"command":"x","env":{"S":"$TG_SECRET"}}}}`), 0o600)
	cfg, err := Load(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Servers["a"].Env["S"]; got != "s3cret" {
		t.Fatalf("S = %q", got)
	}
}

func TestParseKeyValuesNeverEchoesValues(t *testing.T) {
	_, err := ParseKeyValues([]byte("ok=1\nthis-line-holds-a-secret-without-equals\n"))
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v", err)
	}
}

func TestFindOrder(t *testing.T) {
	t.Setenv("TOOLGATE_CONFIG", "/from/env.json")
	if p, _ := Find("/from/flag.json"); p != "/from/flag.json" {
		t.Fatalf("flag: %s", p)
	}
	if p, _ := Find(""); p != "/from/env.json" {
		t.Fatalf("env: %s", p)
	}
	t.Setenv("TOOLGATE_CONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	if _, err := Find(""); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Fatalf("none: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"mcpServers":{"a":{"command":"x","env":{"A":"$B"}}},"filters":{"similarity_threshold":0.2}}`))
	f.Add([]byte(`{"mcpServers":{"r":{"url":"https://h/mcp","transport":"sse","headers":{"A":"${X}"}}}}`))
	f.Add([]byte(`{"globalShortcut":"x","inputs":[],"servers":{"v":{"type":"http","url":"https://${X:-h}/mcp","headers":{"K":"${input:k}"}}}}`))
	f.Add([]byte(`{"mcpServers":{"s":{"type":"stdio","command":"c","env":{"E":"${env:B}","U":"$UNSET"}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "fuzz.json", map[string]string{"B": "1", "X": "2"})
		if err == nil && cfg.Servers == nil {
			t.Fatal("nil servers without error")
		}
	})
}

func TestFilterOrderIsFileOrder(t *testing.T) {
	cfg, err := Parse([]byte(`{"mcpServers":{},"filters":{"rego_policy":"p.rego","similarity_threshold":0.2,"access_control":{},"load_control":{}}}`), "c.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Filters.Order, ","); got != "rego_policy,access_control,load_control" {
		t.Fatalf("order = %s", got)
	}
	if _, err := Parse([]byte(`{"mcpServers":{},"filters":{"a":{},"a":{}}}`), "c.json", nil); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("duplicate key: %v", err)
	}
}

func TestSearchModeDefaultsToAuto(t *testing.T) {
	for in, want := range map[string]string{
		`{"mcpServers":{}}`:                              SearchAuto,
		`{"mcpServers":{},"search":{"mode":"auto"}}`:     SearchAuto,
		`{"mcpServers":{},"search":{"mode":"hybrid"}}`:   SearchHybrid,
		`{"mcpServers":{},"search":{"mode":"lexical"}}`:  SearchLexical,
		`{"mcpServers":{},"search":{"mode":"semantic"}}`: "",
	} {
		cfg, err := Parse([]byte(in), "c.json", nil)
		if want == "" {
			if err == nil || !strings.Contains(err.Error(), `"auto"`) {
				t.Errorf("%s: err = %v, want the valid modes listed", in, err)
			}
			continue
		}
		if err != nil || cfg.Search.Mode != want {
			t.Errorf("%s: mode %q, %v; want %q", in, cfg.Search.Mode, err, want)
		}
	}
}

func TestParseLimits(t *testing.T) {
	cfg, err := Parse([]byte(`{"mcpServers":{},"limits":{"max_tools_per_server":50,"max_description_bytes":2048}}`), "/c.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Limits.Resolved()
	if l.MaxToolsPerServer != 50 || l.MaxDescriptionBytes != 2048 {
		t.Fatalf("set values lost: %+v", l)
	}
	if l.MaxTools != DefaultMaxTools || l.MaxToolNameBytes != DefaultMaxToolNameBytes || l.MaxSchemaBytes != DefaultMaxSchemaBytes || l.ListChangedPerMinute != DefaultListChangedPerMinute {
		t.Fatalf("defaults not filled in: %+v", l)
	}
	if l := (Limits{}).Resolved(); l.MaxToolsPerServer != DefaultMaxToolsPerServer {
		t.Fatalf("no limits object: %+v", l)
	}

	for _, tt := range []struct{ json, want string }{
		{`{"max_tools":-1}`, "limits.max_tools is -1"},
		{`{"list_changed_per_minute":-5}`, "limits.list_changed_per_minute is -5"},
		{`{"max_tools_per_server":200,"max_tools":100}`, "limits.max_tools_per_server (200) is more than limits.max_tools (100)"},
		{`{"max_tools_per_server":20000}`, "limits.max_tools_per_server (20000) is more than limits.max_tools (10000, the default)"},
		{`{"max_tool":5}`, `unknown key "max_tool"`},
		{`{"max_tools":"many"}`, "max_tools"},
	} {
		_, err := Parse([]byte(`{"mcpServers":{},"limits":`+tt.json+`}`), "/etc/tg/config.json", nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "/etc/tg/config.json") {
			t.Errorf("limits %s: err = %v, want %q and the file", tt.json, err, tt.want)
		}
	}
}
