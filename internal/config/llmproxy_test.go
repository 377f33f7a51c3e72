package config

import (
	"strings"
	"testing"
)

func TestLLMProxyConfig(t *testing.T) {
	ok := `{"mcpServers": {}, "llm_proxy": {"providers": {"anthropic": {"base_url": "http://127.0.0.1:9000"}, "openai": {"base_url": "https://api.openai.com/"}}, "tools": {"send_email": "mail"}, "fail_closed": true}}`
	cfg, err := Parse([]byte(ok), "c.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.LLMProxy
	if p == nil || !p.FailClosed || p.Tools["send_email"] != "mail" {
		t.Fatalf("llm_proxy = %+v", p)
	}
	if got := p.BaseURL(ProviderOpenAI); got != "https://api.openai.com" {
		t.Errorf("openai base = %q", got)
	}
	if got := p.BaseURL(ProviderAnthropic); got != "http://127.0.0.1:9000" {
		t.Errorf("anthropic base = %q", got)
	}
	if p.ScanToolResults != ScanAlert || p.Header() != DefaultSessionHeader {
		t.Errorf("defaults: scan %q header %q", p.ScanToolResults, p.Header())
	}
	if c, _ := Parse([]byte(`{"mcpServers": {}}`), "c.json", nil); c.LLMProxy != nil {
		t.Error("no llm_proxy object, but LLMProxy is set")
	}

	bad := []struct{ body, want string }{
		{`{"provider": {}}`, `llm_proxy: unknown key "provider" (did you mean "providers"?)`},
		{`{"providers": {"antropic": {"base_url": "https://x"}}}`, `unknown provider "antropic" (did you mean "anthropic"?)`},
		{`{"providers": {"openai": {}}}`, `llm_proxy.providers.openai: missing "base_url"`},
		{`{"providers": {"openai": {"base_url": "ftp://x"}}}`, `scheme must be http or https`},
		{`{"providers": {"openai": {"base_url": "https://api.openai.com/v1"}}}`, `leave out /v1`},
		{`{"providers": {"openai": {"base_url": "https://x", "key": "k"}}}`, `unknown key "key"`},
		{`{"tools": {"send": "bad__name"}}`, `llm_proxy.tools.send: server name "bad__name"`},
		{`{"scan_tool_results": "maybe"}`, `scan_tool_results "maybe"`},
		{`{"listen": "8788"}`, `listen "8788": want host:port`},
		{`{"fail_closed": "yes"}`, `fail_closed`},
	}
	for _, b := range bad {
		_, err := Parse([]byte(`{"mcpServers": {}, "llm_proxy": `+b.body+`}`), "c.json", nil)
		if err == nil || !strings.Contains(err.Error(), b.want) || !strings.Contains(err.Error(), "c.json") {
			t.Errorf("%s: error %v, want it to contain %q and the file", b.body, err, b.want)
		}
	}
}

// TestLLMProxyExample: the example the docs point to loads.
func TestLLMProxyExample(t *testing.T) {
	cfg, err := Load("../../examples/llm-proxy.json")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLMProxy == nil || cfg.LLMProxy.Listen != "127.0.0.1:8788" || cfg.LLMProxy.Tools["send_email"] != "mail" {
		t.Fatalf("llm_proxy = %+v", cfg.LLMProxy)
	}
}
