package secrets

import (
	"slices"
	"testing"

	"github.com/toolgate/toolgate/internal/config"
)

// A secret substituted into a server's url or args (Claude Code's "${VAR}"
// there) is masked like one in a header. Every .env value is a secret; a
// plain value from the gateway's environment (the host) is not.
func TestConfigValuesIncludesURLVariables(t *testing.T) {
	t.Setenv("MCP_HOST", "mcp.example.com")
	cfg, err := config.Parse([]byte(`{"mcpServers":{"zap":{"url":"https://${MCP_HOST}/api/${ZAP_API_KEY}/mcp"},
		"cli":{"command":"srv","args":["--token","${CLI_TOKEN}"]}}}`), "c.json",
		map[string]string{"ZAP_API_KEY": "zk-9f8e7d6c5b4a", "CLI_TOKEN": "ct-1a2b3c"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Servers["zap"].URL; got != "https://mcp.example.com/api/zk-9f8e7d6c5b4a/mcp" {
		t.Fatalf("url = %q", got)
	}
	got := ConfigValues(cfg, nil)
	if !slices.Contains(got, "zk-9f8e7d6c5b4a") || !slices.Contains(got, "ct-1a2b3c") {
		t.Errorf("the key in the url or the token in args is not treated as a secret: %v", got)
	}
	if slices.Contains(got, "mcp.example.com") {
		t.Errorf("the host is treated as a secret: %v", got)
	}
}

// A server disabled for an unset variable keeps "$VAR" text in its values:
// that names the variable, and is not masked, so the warning can say which
// one is missing. Its literal values are still masked.
func TestConfigValuesLeavesMissingVariableNames(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"mcpServers":{
		"a":{"command":"x","env":{"API_TOKEN":"$TG_SURELY_UNSET_TOKEN","OTHER_SECRET":"literal-s3cret-123"}},
		"b":{"url":"https://h/mcp","headers":{"Authorization":"Bearer ${input:key}"}}
	}}`), "c.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := ConfigValues(cfg, nil)
	for _, v := range []string{"$TG_SURELY_UNSET_TOKEN", "Bearer ${input:key}", "${input:key}"} {
		if slices.Contains(got, v) {
			t.Errorf("%q treated as a secret", v)
		}
	}
	if !slices.Contains(got, "literal-s3cret-123") {
		t.Errorf("the literal secret of a disabled server is not masked: %v", got)
	}
}
