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

// TestConfigValuesEveryCredentialSource covers issue 14 item 10: every
// value from a credential source is masked whatever its name or length,
// and the gateway's own variables are masked when they look like a
// credential even without a KEY/TOKEN word in the name.
func TestConfigValuesEveryCredentialSource(t *testing.T) {
	cfg := &config.Config{
		DotEnv: map[string]string{"NODE_ENV": "production", "SHORT": "zq9x", "PLAIN_NAME": "hunter2-long", "DEBUG": "true", "N": "1"},
		Servers: map[string]*config.Server{
			"s": {
				Env:     map[string]string{"MODE": "k7v", "API_TOKEN": "tok12"},
				Headers: map[string]string{"Authorization": "Bearer ab3de", "X-Team": "blue"},
			},
			"r": {URL: "https://user9:pw%2Fx9@api.example/mcp?api_key=qk42&region=eu"},
		},
	}
	environ := []string{
		"HOME=/root", "PATH=/usr/bin", "PWD=/work/dir", "OLDPWD=/old/dir",
		"GH_PAT=ghp_a1b2c3d4e5f6g7h8i9j0",
		"DATABASE_URL=postgres://app:dbpw77@db.internal:5432/app",
		"SLACK_WEBHOOK_URL=https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX",
		"OPAQUE=Zk3J9s8dLq2Wm4Xp7Rt1",
	}
	r := NewRedactor(ConfigValues(cfg, environ)...)
	for _, leak := range []string{
		"zq9x", "hunter2-long", "k7v", "tok12", "ab3de", "blue", "user9", "pw/x9", "pw%2Fx9", "qk42",
		"ghp_a1b2c3d4e5f6g7h8i9j0", "dbpw77", "postgres://app:dbpw77@db.internal:5432/app",
		"https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX", "Zk3J9s8dLq2Wm4Xp7Rt1",
	} {
		for _, text := range []string{leak, "value=" + leak + ".", `{"v":"` + leak + `"}`} {
			if got := r.String(text); strings.Contains(got, leak) {
				t.Errorf("%q not masked in %q: %q", leak, text, got)
			}
		}
	}
	// Plain words and tiny values are never masked; short values only as
	// whole tokens; the gateway's ordinary variables not at all.
	for _, plain := range []string{"production", "true", "1", "eu", "/root", "/usr/bin", "/work/dir", "/old/dir", "blue5 aside, blueprints"} {
		if got := r.String(plain); got != plain {
			t.Errorf("%q masked: %q", plain, got)
		}
	}
}

func TestRedactorMatchingRules(t *testing.T) {
	r := NewRedactor("abde", "1", "true", "on", "100", "abc", "Zk3J9s8dLq2Wm4Xp7Rt1", "p<&>q-long", "zq9x", "8080")
	tests := map[string]string{
		"key=abde":                 "key=" + Mask,
		"abde":                     Mask,
		"labdes":                   "labdes",
		"abdeabde":                 "abdeabde",
		"(abde)":                   "(" + Mask + ")",
		"1 true on 100":            "1 true on 100",
		"abc abcd":                 Mask + " abcd",
		"xZk3J9s8dLq2Wm4Xp7Rt1x":   "x" + Mask + "x",
		"é-abde-é":                 "é-" + Mask + "-é",
		"a p<&>q-long b":           "a " + Mask + " b",
		"abde then abde and xabde": Mask + " then " + Mask + " and xabde",
		// A short token mixing letters and digits is masked inside words
		// too: a hostile server cannot glue it to other letters.
		"tokenzq9xyz":      "token" + Mask + "yz",
		"port 8080, 18080": "port " + Mask + ", 18080",
	}
	for in, want := range tests {
		if got := r.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRedactorEncodings: a secret is found in a JSON document however the
// document escapes it, and through the encoding of any Go value.
func TestRedactorEncodings(t *testing.T) {
	r := NewRedactor("p<&>q-long", "s3cr3t-value", "zq9x")
	doc := []byte(`{"a":"\u0073\u0033cr3t-value","b":["p\u003c\u0026\u003eq-long"],"zq9x":"zq9x","s3cr3t-value":1,"n":12345}`)
	out, changed, err := r.JSON(doc)
	if err != nil || !changed {
		t.Fatalf("JSON: %v %v", changed, err)
	}
	for _, leak := range []string{"s3cr3t", "q-long", `"zq9x":"zq9x"`} {
		if strings.Contains(string(out), leak) {
			t.Fatalf("JSON left %q: %s", leak, out)
		}
	}
	// Keys are masked too, except the protocol's own field names.
	if !strings.Contains(string(out), `"[REDACTED]":1`) || !strings.Contains(string(out), `"[REDACTED]#4":"[REDACTED]"`) {
		t.Fatalf("JSON: %s", out)
	}
	r2 := NewRedactor("name", "uriTemplate-x")
	out, _, err = r2.JSON([]byte(`{"name":"name","uriTemplate":"a","x":{"name":1}}`))
	if err != nil || string(out) != `{"name":"[REDACTED]","uriTemplate":"a","x":{"name":1}}` {
		t.Fatalf("protocol keys: %s %v", out, err)
	}
	type msg struct {
		Text string         `json:"text"`
		Meta map[string]any `json:"_meta"`
	}
	in := &msg{Text: "p<&>q-long", Meta: map[string]any{"k": []any{"x s3cr3t-value"}}}
	got, changed, err := r.Encoded(in)
	if err != nil || !changed {
		t.Fatalf("Encoded: %v %v", changed, err)
	}
	m := got.(*msg)
	if m.Text != Mask || m.Meta["k"].([]any)[0] != "x "+Mask || in.Text != "p<&>q-long" {
		t.Fatalf("Encoded = %+v (input %+v)", m, in)
	}
	if same, changed, _ := r.Encoded(&msg{Text: "nothing"}); changed || same.(*msg).Text != "nothing" {
		t.Fatal("Encoded changed a clean value")
	}
}

func TestStripURLs(t *testing.T) {
	in := `call failed: Post "https://bob:pw9@api.example/mcp?api_key=abc123&x=1": dial tcp; see http://plain.example/x`
	got := StripURLs(in)
	for _, leak := range []string{"bob", "pw9", "abc123"} {
		if strings.Contains(got, leak) {
			t.Fatalf("StripURLs left %q: %s", leak, got)
		}
	}
	if !strings.Contains(got, "https://api.example/mcp?api_key="+Mask+"&x="+Mask) || !strings.Contains(got, "http://plain.example/x") {
		t.Fatalf("StripURLs = %s", got)
	}
	if URLSecrets("not a url") != nil || StripURL("relative/path?x=1") != "relative/path?x=1" {
		t.Fatal("non-URLs handled as URLs")
	}
}

// TestShortTokenMasked: a tokens-file value shorter than six characters
// (ignored before issue 14) is masked as a whole token.
func TestShortTokenMasked(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokens"), []byte("api=tk7q\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := NewRedactor()
	if _, err := OpenTokens(dir, func(string) (string, bool) { return "", false }, r); err != nil {
		t.Fatal(err)
	}
	if got := r.String(`Authorization: Bearer tk7q`); got != "Authorization: Bearer "+Mask {
		t.Fatalf("short token: %q", got)
	}
}
