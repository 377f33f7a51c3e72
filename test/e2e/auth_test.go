package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The resource identifier toolgate is configured with (RFC 8707). Tokens
// are minted for it by the provider; toolgate need not be reachable there.
const authAudience = "https://toolgate.e2e.test/mcp"

var (
	oidcOnce sync.Once
	oidcBin  string
	oidcErr  error
)

// startOIDC builds and starts the real OpenID provider of
// test/servers/oidc (its own Go module) with the given clients and
// returns its issuer URL.
func startOIDC(t *testing.T, clients []map[string]any, flags ...string) string {
	t.Helper()
	oidcOnce.Do(func() {
		oidcBin = filepath.Join(filepath.Dir(binPath), "oidc-provider")
		cmd := exec.Command("go", "build", "-o", oidcBin, ".")
		cmd.Dir = filepath.Join(repoRoot, "test", "servers", "oidc")
		if out, err := cmd.CombinedOutput(); err != nil {
			oidcErr = fmt.Errorf("build the OpenID provider: %v\n%s", err, out)
		}
	})
	if oidcErr != nil {
		t.Fatal(oidcErr)
	}
	cmd := exec.Command(oidcBin, append([]string{"-clients", string(mustJSON(clients))}, flags...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	issuer, ok := strings.CutPrefix(strings.TrimSpace(line), "ISSUER ")
	if err != nil || !ok {
		t.Fatalf("provider did not print its issuer: %q %v", line, err)
	}
	go io.Copy(io.Discard, out)
	return issuer
}

// clientCredentials obtains an access token from the provider's token
// endpoint (found through its discovery document) by the client
// credentials grant.
func clientCredentials(t *testing.T, issuer, id, secret, scope string) string {
	t.Helper()
	var doc struct {
		TokenEndpoint string `json:"token_endpoint"`
	}
	getJSON(t, issuer+"/.well-known/openid-configuration", &doc)
	req, _ := http.NewRequest("POST", doc.TokenEndpoint, strings.NewReader(url.Values{"grant_type": {"client_credentials"}, "scope": {scope}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(id, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &tok); err != nil || tok.AccessToken == "" || resp.StatusCode != 200 {
		t.Fatalf("token for %s: %s %s", id, resp.Status, b)
	}
	return tok.AccessToken
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func connectAs(t *testing.T, endpoint, token string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-auth", Version: "1"}, nil)
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerTransport{token}}}, nil)
	if err != nil {
		t.Fatalf("connect with a token: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// jwtParts splits a compact JWT into its decoded header and claims and
// its signature segment.
func jwtParts(t *testing.T, tok string) (map[string]any, map[string]any, string) {
	t.Helper()
	p := strings.Split(tok, ".")
	if len(p) != 3 {
		t.Fatalf("not a JWT: %q", tok)
	}
	var h, c map[string]any
	hb, _ := base64.RawURLEncoding.DecodeString(p[0])
	cb, _ := base64.RawURLEncoding.DecodeString(p[1])
	if json.Unmarshal(hb, &h) != nil || json.Unmarshal(cb, &c) != nil {
		t.Fatalf("undecodable JWT %q", tok)
	}
	return h, c, p[2]
}

func jwtJoin(h, c map[string]any, sig string) string {
	return base64.RawURLEncoding.EncodeToString(mustJSON(h)) + "." + base64.RawURLEncoding.EncodeToString(mustJSON(c)) + "." + sig
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestAuthOIDCAndAPIKeys runs toolgate as an OAuth resource server in
// front of a real OpenID provider: clients get tokens by the client
// credentials grant and call tools through toolgate; forged, expired,
// misdirected and under-scoped tokens are refused with the status and
// WWW-Authenticate challenge the MCP authorization spec asks for; API
// keys work beside tokens; /status needs the metrics scope or group; a
// discovery token of one principal is refused for another.
func TestAuthOIDCAndAPIKeys(t *testing.T) {
	t.Parallel()
	issuer := startOIDC(t, []map[string]any{
		{"id": "alice", "secret": "alice-secret", "groups": []string{"dev"}, "audience": authAudience},
		{"id": "bob", "secret": "bob-secret", "groups": []string{"ops"}, "audience": authAudience},
		{"id": "elsewhere", "secret": "x", "audience": "https://other.example/mcp"},
		{"id": "stale", "secret": "x", "audience": authAudience, "ttl": -300},
	})
	// A second, independent provider: its tokens name another issuer and
	// are signed with keys toolgate does not trust.
	otherIssuer := startOIDC(t, []map[string]any{{"id": "alice", "secret": "alice-secret", "audience": authAudience}})

	cfgPath := coreConfig(t, everythingOnly())
	var cfg map[string]any
	b, _ := os.ReadFile(cfgPath)
	_ = json.Unmarshal(b, &cfg)
	cfg["auth"] = map[string]any{
		"oidc": map[string]any{"issuer": issuer, "audience": authAudience, "required_scopes": []string{"mcp"}},
		"api_keys": []map[string]any{
			{"principal": "ci-bot", "groups": []string{"ci"}, "sha256": sha256Hex("ci-key-123")},
			{"principal": "prometheus", "groups": []string{"metrics"}, "sha256": sha256Hex("prom-key-456")},
		},
	}
	// Two teams: dev gets echo, ops get-sum; the CI key echo.
	cfg["filters"] = map[string]any{"access_control": map[string]any{"allow": []any{
		map[string]any{"group": "dev", "tools": []string{"everything__echo"}},
		map[string]any{"group": "ops", "tools": []string{"everything__get-sum"}},
		map[string]any{"principal": "ci-bot", "tools": []string{"everything__echo"}},
	}}}
	if err := os.WriteFile(cfgPath, mustJSON(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	g := startHTTP(t, cfgPath, "--state-dir", state)
	base := strings.TrimSuffix(g.URL, "/mcp")
	mdURL := "https://toolgate.e2e.test/.well-known/oauth-protected-resource/mcp"

	post := func(path, auth string) *http.Response {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
		method := "POST"
		if path != "/mcp" {
			method, body = "GET", ""
		}
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	expect := func(what string, resp *http.Response, status int, header ...string) {
		t.Helper()
		if resp.StatusCode != status {
			t.Fatalf("%s: status %d, want %d", what, resp.StatusCode, status)
		}
		got := resp.Header.Get("WWW-Authenticate")
		for _, h := range header {
			if !strings.Contains(got, h) {
				t.Fatalf("%s: WWW-Authenticate %q lacks %s", what, got, h)
			}
		}
		t.Logf("%s: %d %s", what, resp.StatusCode, got)
	}

	// The metadata is public and names the provider (RFC 9728), at the
	// path-suffixed and the plain well-known address.
	for _, p := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		var md struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
		}
		getJSON(t, base+p, &md)
		if md.Resource != authAudience || len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != issuer {
			t.Fatalf("%s: %+v", p, md)
		}
	}

	alice := clientCredentials(t, issuer, "alice", "alice-secret", "mcp")
	h, c, sig := jwtParts(t, alice)

	// Every path needs a token; the challenge points at the metadata.
	for _, p := range []string{"/mcp", "/status", "/metrics", "/anything"} {
		expect("no token "+p, post(p, ""), 401, `Bearer `, `resource_metadata="`+mdURL+`"`)
	}
	refused := map[string]string{
		"expired (real provider)":   clientCredentials(t, issuer, "stale", "x", "mcp"),
		"wrong audience (RFC 8707)": clientCredentials(t, issuer, "elsewhere", "x", "mcp"),
		"other issuer":              clientCredentials(t, otherIssuer, "alice", "alice-secret", "mcp"),
		"tampered claims":           jwtJoin(h, merge(c, map[string]any{"sub": "bob"}), sig),
		"alg none":                  jwtJoin(merge(h, map[string]any{"alg": "none"}), c, ""),
		"HS256":                     jwtJoin(merge(h, map[string]any{"alg": "HS256"}), c, sig),
		"unknown kid":               jwtJoin(merge(h, map[string]any{"kid": "not-a-key"}), c, sig),
		"truncated signature":       alice[:len(alice)-8],
		"wrong api key":             "ci-key-124",
	}
	for what, tok := range refused {
		expect(what, post("/mcp", "Bearer "+tok), 401, `error="invalid_token"`, `resource_metadata="`+mdURL+`"`)
	}
	noScope := clientCredentials(t, issuer, "alice", "alice-secret", "openid")
	expect("missing scope", post("/mcp", "Bearer "+noScope), 403, `error="insufficient_scope"`, `scope="mcp"`, `resource_metadata=`)

	// /status and /metrics: the metrics scope or group.
	expect("status, token without metrics", post("/status", "Bearer "+alice), 403, `error="insufficient_scope"`, `scope="metrics"`)
	expect("status, api key without metrics", post("/status", "Bearer ci-key-123"), 403, `error="insufficient_scope"`)
	expect("status, token with metrics", post("/status", "Bearer "+clientCredentials(t, issuer, "alice", "alice-secret", "mcp metrics")), 200)
	expect("metrics, api key in group metrics", post("/metrics", "Bearer prom-key-456"), 200)

	// A real client session with each credential calls a tool.
	aliceCS := connectAs(t, g.URL, alice)
	res := call(t, aliceCS, "search_tools", map[string]any{"query": "echo a message back", "top_k": 1})
	aliceTok := discoveryToken(t, res)
	echo := func(cs *mcp.ClientSession, tok, msg string) *mcp.CallToolResult {
		return call(t, cs, "call_tool", map[string]any{"tool_name": "everything__echo", "arguments": map[string]any{"message": msg}, "discovery_token": tok})
	}
	wantOK(t, "alice with her discovery token", echo(aliceCS, aliceTok, "hi from alice"), "hi from alice")

	keyCS := connectAs(t, g.URL, "ci-key-123")
	res = call(t, keyCS, "search_tools", map[string]any{"query": "echo a message back", "top_k": 1})
	keyTok := discoveryToken(t, res)
	wantOK(t, "api key with its discovery token", echo(keyCS, keyTok, "hi from ci"), "hi from ci")

	// Two principals: bob cannot use alice's discovery token, nor the API
	// key's principal alice's, nor alice the key's.
	bobCS := connectAs(t, g.URL, clientCredentials(t, issuer, "bob", "bob-secret", "mcp"))
	wantRefused(t, "bob with alice's discovery token", echo(bobCS, aliceTok, "stolen"), "another principal")

	// Each team finds only its own tools.
	if got := found(t, call(t, bobCS, "search_tools", map[string]any{"query": "echo a message back"})); slices.Contains(got, "everything__echo") || !slices.Contains(found(t, call(t, bobCS, "search_tools", map[string]any{"query": "add two numbers sum"})), "everything__get-sum") {
		t.Fatalf("bob (ops) finds %v for echo; want get-sum only", got)
	}
	if got := found(t, call(t, aliceCS, "search_tools", map[string]any{"query": "add two numbers sum"})); slices.Contains(got, "everything__get-sum") {
		t.Fatalf("alice (dev) finds %v; want no get-sum", got)
	}
	bobSum := call(t, bobCS, "search_tools", map[string]any{"query": "add two numbers sum", "top_k": 1})
	sumTok := discoveryToken(t, bobSum)
	wantOK(t, "bob calls get-sum", call(t, bobCS, "call_tool", map[string]any{"tool_name": "everything__get-sum", "arguments": map[string]any{"a": 2, "b": 3}, "discovery_token": sumTok}), "5")
	wantRefused(t, "ci-bot with alice's discovery token", echo(keyCS, aliceTok, "stolen"), "another principal")
	wantRefused(t, "alice with ci-bot's discovery token", echo(aliceCS, keyTok, "stolen"), "another principal")

	// A stateful session is bound to the principal that opened it: bob's
	// valid token with alice's session id is refused by the SDK.
	statefulCS := connectAsVersion(t, g.URL, alice, "2025-11-25")
	if statefulCS.ID() == "" {
		t.Fatal("no session id for a 2025-11-25 session")
	}
	onSession := func(token string) (int, string) {
		req, _ := http.NewRequest("POST", g.URL, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", statefulCS.ID())
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	if code, body := onSession(alice); code != http.StatusOK {
		t.Fatalf("alice on her own session: %d %s", code, body)
	}
	if code, body := onSession(clientCredentials(t, issuer, "bob", "bob-secret", "mcp")); code != http.StatusForbidden || !strings.Contains(body, "session user mismatch") {
		t.Fatalf("bob on alice's session: %d %s; want 403 session user mismatch", code, body)
	}

	// Every audit record of a request names its principal, and the CLI
	// filters by it.
	callsOf := func(principal string) []map[string]any {
		out, err := exec.CommandContext(ctxT(t), binPath, "calls", "--state-dir", state, "--principal", principal, "--json").CombinedOutput()
		if err != nil {
			t.Fatalf("toolgate calls --principal %s: %v\n%s", principal, err, out)
		}
		var recs []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if line == "" {
				continue
			}
			var r map[string]any
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("calls output %q: %v", line, err)
			}
			recs = append(recs, r)
		}
		return recs
	}
	aliceID, bobID := issuer+"|alice", issuer+"|bob"
	for who, want := range map[string][]string{aliceID: {"allow", "block"}, bobID: {"allow", "block"}, "ci-bot": {"allow", "block"}} {
		recs := callsOf(who)
		actions := map[string]bool{}
		for _, r := range recs {
			if r["principal"] != who {
				t.Fatalf("calls --principal %s listed a record of %v", who, r["principal"])
			}
			actions[fmt.Sprint(r["action"])] = true
		}
		for _, a := range want {
			if !actions[a] {
				t.Fatalf("calls --principal %s: no %q record among %v", who, a, recs)
			}
		}
	}
	if recs := callsOf("nobody"); len(recs) != 0 {
		t.Fatalf("calls --principal nobody: %v", recs)
	}
	if out, err := auditVerify(t, state); err != nil || !strings.Contains(out, "chain intact") {
		t.Fatalf("audit verify: %v %s", err, out)
	}
	noPanic(t, g.Logs.String())
}

func connectAsVersion(t *testing.T, endpoint, token, version string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-auth", Version: "1"}, nil)
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerTransport{token}, Timeout: time.Minute}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect with a token: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
