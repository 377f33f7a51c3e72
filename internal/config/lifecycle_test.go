package config

import (
	"strings"
	"testing"
	"time"
)

func TestServerLifecycleKeys(t *testing.T) {
	cfg, err := Parse([]byte(`{"mcpServers":{
		"a":{"command":"x"},
		"b":{"command":"x","lazy":true,"idle_timeout":0.05,"call_timeout":2.5},
		"c":{"url":"https://h/mcp","idle_timeout":0}
	}}`), "/etc/tg/config.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		lazy       bool
		idle, call time.Duration
	}{
		{"a", false, DefaultIdleTimeout, 0},
		{"b", true, 50 * time.Millisecond, 2500 * time.Millisecond},
		{"c", false, 0, 0},
	}
	for _, tt := range tests {
		s := cfg.Servers[tt.name]
		if s.Lazy != tt.lazy || s.Idle() != tt.idle || s.CallLimit() != tt.call {
			t.Errorf("%s: lazy %v idle %v call %v, want %v %v %v", tt.name, s.Lazy, s.Idle(), s.CallLimit(), tt.lazy, tt.idle, tt.call)
		}
	}
}

func TestServerLifecycleErrors(t *testing.T) {
	for _, tt := range []struct{ json, want string }{
		{`{"mcpServers":{"a":{"command":"x","idle_timeout":-1}}}`, "idle_timeout -1"},
		{`{"mcpServers":{"a":{"command":"x","call_timeout":0}}}`, "call_timeout 0"},
		{`{"mcpServers":{"a":{"command":"x","idle_timeout":"5m"}}}`, "idle_timeout: want float64"},
		{`{"mcpServers":{"a":{"command":"x","lazy":"yes"}}}`, "lazy: want bool"},
		{`{"mcpServers":{"a":{"command":"x","idle":5}}}`, `unknown key "idle"`},
	} {
		_, err := Parse([]byte(tt.json), "/etc/tg/config.json", nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "mcpServers.a") {
			t.Errorf("%s: error %v, want it to name mcpServers.a and contain %q", tt.json, err, tt.want)
		}
	}
}
