package loadcontrol

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/extensions/internal/exttest"
)

func TestConfigErrors(t *testing.T) {
	tests := []struct{ raw, want string }{
		{`{"deny_url_pattern": ["x"]}`, `unknown field "deny_url_pattern"`},
		{`{"allow_url_patterns": "https://github.com/*"}`, `allow_url_patterns: want an array of strings`},
		{`{"deny_names": [""]}`, `deny_names[0]: empty name`},
		{`{"deny_name_patterns": [""]}`, `deny_name_patterns[0]: empty pattern`},
		{`{"deny_url_patterns": ["http://*", "github.com"]}`, `deny_url_patterns[1]: "github.com": want SCHEME://HOST`},
		{`{"allow_url_patterns": ["https://u@github.com/"]}`, `allow_url_patterns[0]`},
	}
	for _, tt := range tests {
		_, err := New(json.RawMessage(tt.raw))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%s) = %v, want error containing %q", tt.raw, err, tt.want)
		}
	}
}

func TestLoadFilter(t *testing.T) {
	const cfg = `{
		"deny_names": ["Github"],
		"deny_name_patterns": ["evil_*"],
		"deny_url_patterns": ["http://*"],
		"allow_url_patterns": ["https://github.com/*", "https://*.internal.corp/*"]
	}`
	e, err := New(json.RawMessage(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if err := exttest.Provision(e, context.Background(), extension.Host{}); err != nil {
		t.Fatal(err)
	}
	f := e.(extension.LoadFilter).FilterLoad
	tests := []struct {
		name, url string
		wantRule  string
	}{
		{"gh", "https://github.com/mcp", ""},
		{"gh", "https://GitHub.com./mcp", ""},
		{"corp", "https://tools.internal.corp/mcp", ""},
		{"github", "https://github.com/mcp", "load_control.deny_names"},
		{"GITHUB", "https://github.com/mcp", "load_control.deny_names"},
		{"evil_one", "https://github.com/mcp", "load_control.deny_name_patterns"},
		{"EVIL_two", "https://github.com/mcp", "load_control.deny_name_patterns"},
		{"plain", "http://github.com/mcp", "load_control.deny_url_patterns"},
		{"plain", "HTTP://github.com:443/mcp", "load_control.deny_url_patterns"},
		{"plain", "http://127.0.0.1:8080/mcp", "load_control.deny_url_patterns"},
		{"x", "https://evil.com/https://github.com/x", "load_control.allow_url_patterns"},
		{"x", "https://github.com@evil.com/", "load_control.allow_url_patterns"},
		{"x", "https://github.com.evil.com/", "load_control.allow_url_patterns"},
		{"x", "https://internal.corp/", "load_control.allow_url_patterns"},
		{"x", "https://127.0.0.1/", "load_control.allow_url_patterns"},
		{"x", "not a url", "load_control.url"},
		{"x", "https://git%68ub.com/", "load_control.url"},
	}
	for _, tt := range tests {
		err := f(context.Background(), &extension.LoadRequest{ServerName: tt.name, URL: tt.url})
		if tt.wantRule == "" {
			if err != nil {
				t.Errorf("load %s %s: %v, want admitted", tt.name, tt.url, err)
			}
			continue
		}
		d, ok := extension.AsDenial(err)
		if !ok || d.Rule != tt.wantRule {
			t.Errorf("load %s %s: %v, want a denial by %s", tt.name, tt.url, err, tt.wantRule)
			continue
		}
		for _, leak := range []string{"http://*", "github.com/*", "evil_", "internal.corp"} {
			if strings.Contains(d.Reason, leak) {
				t.Errorf("reason %q leaks %q", d.Reason, leak)
			}
		}
	}
}

func TestEmptyConfigAdmitsEverything(t *testing.T) {
	e, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.(extension.LoadFilter).FilterLoad(context.Background(), &extension.LoadRequest{ServerName: "a", URL: "http://x/"}); err != nil {
		t.Fatal(err)
	}
}

func TestRegistered(t *testing.T) {
	f, ok := extension.Lookup(Key)
	if !ok {
		t.Fatal("load_control is not registered")
	}
	e, err := f(json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := extension.ValidateID(e.ID()); err != nil {
		t.Fatal(err)
	}
	if extension.PhaseOf(e) != extension.PhaseAdmit {
		t.Fatalf("phase %v", extension.PhaseOf(e))
	}
}

func TestReadmeExamples(t *testing.T) { exttest.ReadmeExamples(t, Key, New) }
