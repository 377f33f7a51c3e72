package config

import (
	"strings"
	"testing"
)

func TestExposure(t *testing.T) {
	const one = `"mcpServers": {"a": {"command": "x"}}`
	const two = `"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}`
	for _, tc := range []struct {
		name, body, err string
		mode            string
		namespaced      bool
	}{
		{"default", `{` + one + `}`, "", ModeMeta, true},
		{"passthrough", `{"mode": "passthrough", ` + two + `}`, "", ModePassthrough, true},
		{"bare", `{"mode": "passthrough", "namespace": false, ` + one + `}`, "", ModePassthrough, false},
		{"bare with two", `{"mode": "passthrough", "namespace": false, ` + two + `}`, "exactly one enabled server", "", false},
		{"bare in meta", `{"namespace": false, ` + one + `}`, `only applies to "mode": "passthrough"`, "", false},
		{"hybrid", `{"mode": "hybrid", "pinned_tools": ["a__t"], ` + one + `}`, "", ModeHybrid, true},
		{"pinned outside hybrid", `{"mode": "passthrough", "pinned_tools": ["a__t"], ` + one + `}`, `only applies to "mode": "hybrid"`, "", false},
		{"pinned unqualified", `{"mode": "hybrid", "pinned_tools": ["t"], ` + one + `}`, "not a qualified name", "", false},
		{"pinned unknown server", `{"mode": "hybrid", "pinned_tools": ["z__t"], ` + one + `}`, `server "z"`, "", false},
		{"unknown mode", `{"mode": "proxy", ` + one + `}`, `mode "proxy"`, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.body), "/x/config.json", nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("want error containing %q, got %v", tc.err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Mode != tc.mode || cfg.Namespaced() != tc.namespaced {
				t.Fatalf("mode %q namespaced %v, want %q %v", cfg.Mode, cfg.Namespaced(), tc.mode, tc.namespaced)
			}
		})
	}
}
