package config

import (
	"strings"
	"testing"
)

func TestEgressConfig(t *testing.T) {
	const file = "/etc/tg/config.json"
	t.Run("off unless configured", func(t *testing.T) {
		cfg, err := Parse([]byte(`{"mcpServers":{"a":{"command":"x"}}}`), file, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s := cfg.Servers["a"]; s.Egress != nil || s.EgressOn() {
			t.Fatalf("egress = %+v, want nil (off) for a config without egress", s.Egress)
		}
	})
	t.Run("server and default", func(t *testing.T) {
		cfg, err := Parse([]byte(`{"mcpServers":{
			"a":{"command":"x","egress":{"allow":["api.github.com:443","*.githubusercontent.com:443","127.0.0.1:8080","[::1]:*"]}},
			"b":{"command":"y"},
			"c":{"command":"z","egress":{"mode":"off"}},
			"r":{"url":"https://example.com/mcp"}
		},"filters":{"egress":{"default":{"mode":"monitor","allow":[],"fallback":"monitor"}}}}`), file, nil)
		if err != nil {
			t.Fatal(err)
		}
		a := cfg.Servers["a"].Egress
		if a.Mode != "monitor" || len(a.Rules) != 4 || a.Fallback != "monitor" {
			t.Fatalf("a: %+v (mode and fallback come from the default)", a)
		}
		if b := cfg.Servers["b"].Egress; b == nil || b.Mode != "monitor" || len(b.Rules) != 0 {
			t.Fatalf("b: %+v, want the default", b)
		}
		if cfg.Servers["c"].EgressOn() {
			t.Fatal("c: mode off is on")
		}
		if cfg.Servers["r"].Egress != nil {
			t.Fatal("a url server got an egress policy")
		}
		if _, ok := cfg.Filters.Extensions["egress"]; ok {
			t.Fatal("filters.egress was handed to the extensions")
		}
	})
	t.Run("server without mode enforces", func(t *testing.T) {
		cfg, err := Parse([]byte(`{"mcpServers":{"a":{"command":"x","egress":{"allow":[]}}}}`), file, nil)
		if err != nil {
			t.Fatal(err)
		}
		if m := cfg.Servers["a"].Egress.Mode; m != "enforce" {
			t.Fatalf("mode %q", m)
		}
	})
	bad := []struct{ name, json, want string }{
		{"mode", `{"mcpServers":{"a":{"command":"x","egress":{"mode":"block"}}}}`, `mcpServers.a: egress: mode "block"`},
		{"unknown key", `{"mcpServers":{"a":{"command":"x","egress":{"alow":[]}}}}`, `unknown key "alow"`},
		{"no port", `{"mcpServers":{"a":{"command":"x","egress":{"allow":["api.github.com"]}}}}`, `allow[0] "api.github.com": want "host:port"`},
		{"port range", `{"mcpServers":{"a":{"command":"x","egress":{"allow":["h:70000"]}}}}`, `port "70000"`},
		{"inner wildcard", `{"mcpServers":{"a":{"command":"x","egress":{"allow":["a.*.com:443"]}}}}`, `wildcards only as a leading`},
		{"numeric host", `{"mcpServers":{"a":{"command":"x","egress":{"allow":["2130706433:80"]}}}}`, `number that some resolvers read`},
		{"zone", `{"mcpServers":{"a":{"command":"x","egress":{"allow":["[fe80::1%eth0]:80"]}}}}`, `zone`},
		{"url server", `{"mcpServers":{"a":{"url":"https://h/","egress":{"mode":"monitor"}}}}`, `only applies to command servers`},
		{"fallback", `{"mcpServers":{"a":{"command":"x","egress":{"fallback":"off"}}}}`, `fallback "off"`},
		{"default needs mode", `{"mcpServers":{},"filters":{"egress":{"default":{"allow":[]}}}}`, `filters.egress.default: "mode" is required`},
		{"default unknown", `{"mcpServers":{},"filters":{"egress":{"defualt":{}}}}`, `filters.egress: unknown key "defualt"`},
		{"default bad allow", `{"mcpServers":{},"filters":{"egress":{"default":{"mode":"enforce","allow":["x:y"]}}}}`, `filters.egress.default: allow[0] "x:y"`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.json), file, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), file) {
				t.Fatalf("error %v: want it to contain %q and the file", err, tt.want)
			}
		})
	}
}
