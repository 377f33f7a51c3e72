package config

import (
	"strings"
	"testing"
)

func TestStateConfig(t *testing.T) {
	cfg, err := Parse([]byte(`{"mcpServers": {}}`), "c.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.State.Backend != StateMemory || cfg.State.Shared() || cfg.State.Replica == "" {
		t.Fatalf("default state = %+v, want memory with a replica id", cfg.State)
	}

	cfg, err = Parse([]byte(`{"mcpServers": {}, "state": {"backend": "redis", "url": "rediss://:${REDIS_PW}@cache.internal:6380/2", "replica": "r1"}}`),
		"c.json", map[string]string{"REDIS_PW": "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.State; !s.Shared() || s.URL != "rediss://:s3cret@cache.internal:6380/2" || s.Prefix != DefaultStatePrefix || s.Replica != "r1" {
		t.Fatalf("redis state = %+v", s)
	}

	bad := []struct{ body, want string }{
		{`{"backend": "etcd"}`, `state.backend "etcd": want "memory" or "redis"`},
		{`{"backend": "redis"}`, `"backend": "redis" needs "url"`},
		{`{"url": "redis://h:6379"}`, `"url", "prefix" and "ca_file" need "backend": "redis"`},
		{`{"backend": "redis", "url": "http://h:6379"}`, `scheme "http": want redis:// or rediss://`},
		{`{"backend": "redis", "url": "redis://:pw@/0"}`, `no host`},
		{`{"backend": "redis", "url": "redis://:pw@h:99999"}`, `bad port "99999"`},
		{`{"backend": "redis", "url": "redis://:pw@h:6379/x"}`, `database "x" is not a number`},
		{`{"backend": "redis", "url": "redis://:pw@h:6379/0?tls=1"}`, `unknown query parameter "tls"`},
		{`{"backend": "redis", "url": "redis://$NOPE@h"}`, `variable $NOPE is not set`},
		{`{"backend": "redis", "url": "redis://h", "prefix": "a b"}`, `state.prefix "a b"`},
		{`{"backend": "redis", "url": "redis://h", "replica": "a b"}`, `state.replica "a b"`},
		{`{"backend": "redis", "uri": "redis://h"}`, `state: unknown key "uri"`},
		{`{"backend": "redis", "url": "redis://h", "ca_file": "ca.pem"}`, `ca_file: only for a rediss://`},
		{`{"backend": "redis", "url": "rediss://h", "ca_file": "missing.pem"}`, `state.ca_file:`},
	}
	for _, c := range bad {
		_, err := Parse([]byte(`{"mcpServers": {}, "state": `+c.body+`}`), "c.json", nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.body, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "pw@") {
			t.Errorf("%s: error %q repeats the password", c.body, err)
		}
	}
}
