package secrets

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/config"
)

func noEnv(string) (string, bool) { return "", false }

func TestTokensDefaultAndRotation(t *testing.T) {
	dir := t.TempDir()
	r := NewRedactor()
	tok, err := OpenTokens(dir, noEnv, r)
	if err != nil {
		t.Fatalf("missing default tokens file must be fine: %v", err)
	}
	if _, ok, _ := tok.Get("github"); ok {
		t.Fatal("token from a missing file")
	}
	p := filepath.Join(dir, "tokens")
	os.WriteFile(p, []byte("# tokens\ngithub=\"first-secret-value\"\nnotion='n-secret-value'\n"), 0o600)
	got, ok, err := tok.Get("github")
	if err != nil || !ok || got.Value != "first-secret-value" {
		t.Fatalf("Get = %+v %v %v", got, ok, err)
	}
	os.WriteFile(p, []byte("github=second-secret-value\n"), 0o600)
	if got, _, _ := tok.Get("github"); got.Value != "second-secret-value" {
		t.Fatalf("rotation not picked up: %q", got.Value)
	}
	for _, v := range []string{"first-secret-value", "second-secret-value", "n-secret-value"} {
		if s := r.String("x " + v + " y"); strings.Contains(s, v) {
			t.Fatalf("%q not redacted: %s", v, s)
		}
	}
}

func TestTokensAge(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tokens")
	os.WriteFile(p, []byte("a=value-one-long\n"), 0o600)
	old := time.Now().Add(-3 * time.Hour)
	os.Chtimes(p, old, old)
	tok, err := OpenTokens(dir, noEnv, NewRedactor())
	if err != nil {
		t.Fatal(err)
	}
	if age := tok.Age("a"); age < 2*time.Hour {
		t.Fatalf("age of a token present at startup = %v, want about the file's age", age)
	}
	os.WriteFile(p, []byte("a=value-two-long\n"), 0o600)
	tok.Get("a")
	if age := tok.Age("a"); age > time.Minute {
		t.Fatalf("age after a change = %v", age)
	}
}

func TestTokensFileVar(t *testing.T) {
	dir := t.TempDir()
	lookup := func(k string) (string, bool) {
		if k == TokensFileVar {
			return "secrets/tg-tokens", true
		}
		return "", false
	}
	_, err := OpenTokens(dir, lookup, NewRedactor())
	if err == nil || !strings.Contains(err.Error(), TokensFileVar) || !strings.Contains(err.Error(), filepath.Join(dir, "secrets/tg-tokens")) {
		t.Fatalf("set but missing: %v", err)
	}
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	os.WriteFile(filepath.Join(dir, "secrets/tg-tokens"), []byte("s=abcdefgh\n"), 0o600)
	tok, err := OpenTokens(dir, lookup, NewRedactor())
	if err != nil || tok.Path() != filepath.Join(dir, "secrets/tg-tokens") {
		t.Fatalf("%v %v", tok, err)
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	os.WriteFile(filepath.Join(home, "tk"), []byte(""), 0o600)
	tok, err = OpenTokens(dir, func(k string) (string, bool) { return "~/tk", k == TokensFileVar }, NewRedactor())
	if err != nil || tok.Path() != filepath.Join(home, "tk") {
		t.Fatalf("~: %v %v", tok, err)
	}
}

func TestTokensMalformedNeverEchoes(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "tokens"), []byte("ghp_leakyvalue_without_equals\n"), 0o600)
	_, err := OpenTokens(dir, noEnv, NewRedactor())
	if err == nil || strings.Contains(err.Error(), "leaky") {
		t.Fatalf("err = %v", err)
	}
}

func TestEnvFilter(t *testing.T) {
	parent := []string{"PATH=/bin", "HOME=/root", "AWS_SECRET_ACCESS_KEY=x", "GITHUB_TOKEN=t", "GITHUB_ORG=o", "NODE_ENV=prod", "ANTHROPIC_API_KEY=k", "DEBUG=1"}
	names := func(env []string) []string {
		var out []string
		for _, kv := range env {
			k, _, _ := strings.Cut(kv, "=")
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	tests := []struct {
		name         string
		f            EnvFilter
		own          map[string]string
		want, strips []string
	}{
		{"default passes only standard vars", EnvFilter{}, map[string]string{"OWN": "1"},
			[]string{"HOME", "OWN", "PATH"}, []string{"ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY", "DEBUG", "GITHUB_ORG", "GITHUB_TOKEN", "NODE_ENV"}},
		{"allow glob strips sensitive suffixes", EnvFilter{Allow: []string{"GITHUB_*"}}, nil,
			[]string{"GITHUB_ORG", "HOME", "PATH"}, nil},
		{"allow by exact name keeps a token", EnvFilter{Allow: []string{"GITHUB_TOKEN"}}, nil,
			[]string{"GITHUB_TOKEN", "HOME", "PATH"}, nil},
		{"allow wins over deny", EnvFilter{Allow: []string{"NODE_ENV"}, Deny: []string{"NODE_*"}}, nil,
			[]string{"HOME", "NODE_ENV", "PATH"}, nil},
		{"deny passes the rest", EnvFilter{Deny: []string{"AWS_*", "*_API_KEY", "GITHUB_TOKEN"}}, nil,
			[]string{"DEBUG", "GITHUB_ORG", "HOME", "NODE_ENV", "PATH"}, []string{"ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN"}},
		{"own env overrides", EnvFilter{}, map[string]string{"PATH": "/custom"},
			[]string{"HOME", "PATH"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, stripped := tt.f.Apply(parent, tt.own)
			if got := names(env); !slices.Equal(got, tt.want) {
				t.Fatalf("env names = %v, want %v", got, tt.want)
			}
			if tt.strips != nil && !slices.Equal(stripped, tt.strips) {
				t.Fatalf("stripped = %v, want %v", stripped, tt.strips)
			}
			if tt.own["PATH"] != "" && !slices.Contains(env, "PATH=/custom") {
				t.Fatalf("own PATH lost: %v", env)
			}
		})
	}
	if err := (EnvFilter{Allow: []string{"["}}).Validate(); err == nil {
		t.Fatal("bad glob accepted")
	}
}

func TestRedactorLogHandler(t *testing.T) {
	r := NewRedactor("canary-1234567", "x")
	var buf bytes.Buffer
	log := slog.New(r.Handler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	log = log.With("bound", "pre canary-1234567")
	log.Debug("msg canary-1234567", "s", "canary-1234567", "err", errors.New("auth canary-1234567 failed"),
		slog.Group("g", "inner", "canary-1234567"), "n", 5)
	out := buf.String()
	if strings.Contains(out, "canary-1234567") || strings.Count(out, Mask) != 5 {
		t.Fatalf("log output: %s", out)
	}
	// Too-short values are not treated as secrets.
	if r.String("x marks") != "x marks" {
		t.Fatal("short value redacted")
	}
	v := r.Value(map[string]any{"a": []any{"canary-1234567", 3.0}, "canary-1234567": "k"}).(map[string]any)
	if v["a"].([]any)[0] != Mask || v[Mask] != "k" {
		t.Fatalf("Value = %v", v)
	}
}

func TestConfigValuesSkipsPlainSettings(t *testing.T) {
	cfg := &config.Config{
		DotEnv: map[string]string{"NODE_ENV": "production", "DB_PASSWORD": "hunter2-long", "GITHUB": "ghp_a1b2c3d4e5f6g7h8"},
		Servers: map[string]*config.Server{"s": {
			Env:     map[string]string{"MODE": "restart", "API_TOKEN": "tok-123456"},
			Headers: map[string]string{"Authorization": "Bearer abcdef123", "X-Team": "blue"},
		}},
	}
	got := ConfigValues(cfg, []string{"HOME=/root", "MY_SECRET=s3cr3t-value"})
	for _, want := range []string{"hunter2-long", "ghp_a1b2c3d4e5f6g7h8", "tok-123456", "Bearer abcdef123", "abcdef123", "s3cr3t-value"} {
		if !slices.Contains(got, want) {
			t.Errorf("%q not treated as a secret", want)
		}
	}
	for _, plain := range []string{"production", "restart", "blue", "/root"} {
		if slices.Contains(got, plain) {
			t.Errorf("%q treated as a secret", plain)
		}
	}
}
