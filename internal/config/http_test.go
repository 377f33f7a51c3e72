package config

import (
	"strings"
	"testing"
	"time"
)

func TestHTTPObject(t *testing.T) {
	cfg, err := Parse([]byte(`{"mcpServers":{},"http":{"allowed_hosts":["GW.Example.com.","10.0.0.5","[::1]"],"max_sessions":50,"session_idle_timeout":60}}`), "c.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.HTTP.AllowedHosts, ","); got != "gw.example.com,10.0.0.5,::1" {
		t.Errorf("allowed_hosts = %s", got)
	}
	if cfg.HTTP.SessionLimit() != 50 || cfg.HTTP.SessionIdle() != time.Minute {
		t.Errorf("limits = %d, %v", cfg.HTTP.SessionLimit(), cfg.HTTP.SessionIdle())
	}
	def, err := Parse([]byte(`{"mcpServers":{}}`), "c.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	if def.HTTP.SessionLimit() != DefaultMaxSessions || def.HTTP.SessionIdle() != DefaultSessionIdleTimeout {
		t.Errorf("defaults = %d, %v", def.HTTP.SessionLimit(), def.HTTP.SessionIdle())
	}

	for _, c := range []struct{ json, want string }{
		{`{"allowed_hosts":["https://gw.example.com"]}`, `http.allowed_hosts[0]: "https://gw.example.com" is not a host name`},
		{`{"allowed_hosts":["gw.example.com:8080"]}`, `allowed_hosts[0]: "gw.example.com:8080"`},
		{`{"allowed_hosts":["*.example.com"]}`, "no scheme, port, path or wildcard"},
		{`{"allowed_hosts":[""]}`, "allowed_hosts[0]"},
		{`{"max_sessions":0}`, "http.max_sessions: 0; want at least 1"},
		{`{"session_idle_timeout":-1}`, "http.session_idle_timeout"},
		{`{"alowed_hosts":[]}`, `unknown key "alowed_hosts"`},
	} {
		_, err := Parse([]byte(`{"mcpServers":{},"http":`+c.json+`}`), "c.json", nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "c.json") {
			t.Errorf("http %s: error %v, want it to contain %q and the file", c.json, err, c.want)
		}
	}
}
