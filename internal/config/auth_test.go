package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testHash = "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b" // sha256("secret")

func TestAuthObject(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.json")
	keys := `[{"principal":"bob","groups":["ops"],"sha256":"` + strings.Repeat("ab", 32) + `"}]`
	if err := os.WriteFile(filepath.Join(dir, "keys.json"), []byte(keys), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse([]byte(`{"mcpServers":{},"auth":{
		"api_keys":[{"principal":"alice","groups":["dev"],"sha256":"`+strings.ToUpper(testHash)+`"}],
		"api_keys_file":"keys.json",
		"oidc":{"issuer":"https://id.example.com/","audience":"https://gw.example/mcp","required_scopes":["mcp"]}}}`), file, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Auth
	if !a.Enabled() || len(a.APIKeys) != 2 || a.APIKeys[0].SHA256 != testHash || a.APIKeys[1].Principal != "bob" {
		t.Fatalf("api keys %+v", a.APIKeys)
	}
	if a.OIDC.Issuer != "https://id.example.com" || a.OIDC.GroupsClaim != DefaultGroupsClaim || len(a.OIDC.Algorithms) != len(DefaultAlgorithms) {
		t.Fatalf("oidc %+v", a.OIDC)
	}
	if got := a.RequiredScopes(); len(got) != 1 || got[0] != "mcp" {
		t.Fatalf("required scopes %v", got)
	}
	if def, _ := Parse([]byte(`{"mcpServers":{}}`), file, nil); def.Auth.Enabled() {
		t.Fatal("auth enabled without an auth object")
	}

	oidc := func(extra string) string {
		return `{"oidc":{"issuer":"https://id.example.com","audience":"https://gw.example/mcp"` + extra + `}}`
	}
	for _, c := range []struct{ json, want string }{
		{`{}`, `auth: set "oidc", "api_keys" or "api_keys_file"`},
		{`{"api_keys":[]}`, `an empty "auth" would leave the frontend open`},
		{`{"api_keys":[{"principal":"a","sha256":"secret"}]}`, `auth.api_keys[0] (a): "sha256" must be the 64 hex digits`},
		{`{"api_keys":[{"principal":"","sha256":"` + testHash + `"}]}`, `auth.api_keys[0]: missing "principal"`},
		{`{"api_keys":[{"principal":"a","sha256":"` + testHash + `"},{"principal":"b","sha256":"` + testHash + `"}]}`, `auth.api_keys[1] (b): same key as principal "a"`},
		{`{"api_keys":[{"principal":"a","key":"secret"}]}`, `unknown key "key"`},
		{`{"api_keys_file":"missing.json"}`, `auth.api_keys_file: open`},
		{`{"apikeys":[]}`, `unknown key "apikeys"`},
		{`{"oidc":{"issuer":"http://id.example.com","audience":"https://gw.example/mcp"}}`, `auth.oidc.issuer: "http://id.example.com": want https`},
		{`{"oidc":{"audience":"https://gw.example/mcp"}}`, `auth.oidc: missing "issuer"`},
		{`{"oidc":{"issuer":"https://id.example.com"}}`, `auth.oidc: missing "audience"`},
		{oidc(`,"algorithms":["HS256"]`), `auth.oidc.algorithms[0]: "HS256" is not accepted`},
		{oidc(`,"algorithms":["none"]`), `"none" is not accepted`},
		{oidc(`,"required_scopes":["a b"]`), `auth.oidc.required_scopes[0]`},
		{oidc(`,"audiance":"x"`), `unknown key "audiance"`},
	} {
		_, err := Parse([]byte(`{"mcpServers":{},"auth":`+c.json+`}`), file, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "c.json") {
			t.Errorf("auth %s: error %v, want it to contain %q and the file", c.json, err, c.want)
		}
	}
	// http to a loopback provider is fine (tests, a provider on the host).
	if _, err := Parse([]byte(`{"mcpServers":{},"auth":{"oidc":{"issuer":"http://127.0.0.1:9000","audience":"http://127.0.0.1:8787/mcp"}}}`), file, nil); err != nil {
		t.Fatal(err)
	}
}
