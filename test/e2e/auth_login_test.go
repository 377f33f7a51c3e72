package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolgate/toolgate/internal/oauthclient"
)

// oauthResource is an MCP server protected the way the MCP authorization
// spec describes: 401 with a resource_metadata challenge, protected
// resource metadata naming the authorization server, and access tokens
// checked against the provider's userinfo endpoint. It records every
// access token it accepted.
type oauthResource struct {
	url string

	mu   sync.Mutex
	seen []string
}

func newOAuthResource(t *testing.T, issuer string) *oauthResource {
	or := &oauthResource{}
	s := mcp.NewServer(&mcp.Implementation{Name: "vault", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "Tell which vault account this call runs as"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "vault account: " + req.Extra.TokenInfo.UserID}}}, nil, nil
	})
	verify := func(ctx context.Context, token string, _ *http.Request) (*sdkauth.TokenInfo, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", issuer+"/userinfo", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var ui struct {
			Sub      string `json:"sub"`
			Username string `json:"preferred_username"`
		}
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&ui) != nil || ui.Sub == "" {
			return nil, sdkauth.ErrInvalidToken
		}
		or.mu.Lock()
		or.seen = append(or.seen, token)
		or.mu.Unlock()
		return &sdkauth.TokenInfo{UserID: ui.Username, Expiration: time.Now().Add(time.Minute)}, nil
	}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	or.url = srv.URL + "/mcp"
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	mux.Handle("/mcp", sdkauth.RequireBearerToken(verify, &sdkauth.RequireBearerTokenOptions{ResourceMetadataURL: srv.URL + "/.well-known/oauth-protected-resource/mcp"})(h))
	mux.Handle("/.well-known/oauth-protected-resource/mcp", sdkauth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: or.url, AuthorizationServers: []string{issuer}, ScopesSupported: []string{"openid", "profile"},
	}))
	return or
}

func (or *oauthResource) tokens() []string {
	or.mu.Lock()
	defer or.mu.Unlock()
	return append([]string(nil), or.seen...)
}

// TestAuthLoginUpstreamOAuth: "toolgate auth login" against a real
// authorization server (zitadel's op, with dynamic client registration)
// and an MCP server that asks for OAuth; the browser is played by an
// HTTP client following the redirects. The gateway then calls the server
// with the stored login, refreshing its short-lived access token before
// it expires; no access or refresh token ever shows in the gateway's
// log, the CLI's output, the model's results or the state folder (but
// for the encrypted store).
func TestAuthLoginUpstreamOAuth(t *testing.T) {
	t.Parallel()
	// Access tokens said to last 30 s: inside the gateway's one-minute
	// refresh margin from the start, so every use refreshes first.
	issuer := startOIDC(t, nil, "-code-ttl", "30")
	vault := newOAuthResource(t, issuer)
	cfgPath := coreConfig(t, map[string]any{"vault": map[string]any{"url": vault.url}})
	state := t.TempDir()

	// Without a login the server refuses the gateway.
	login := exec.CommandContext(ctxT(t), binPath, "auth", "login", "vault", "--config", cfgPath, "--state-dir", state, "--no-browser", "--timeout", "60s")
	stderr, err := login.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	login.Stdout = &stdout
	if err := login.Start(); err != nil {
		t.Fatal(err)
	}
	var loginErr strings.Builder
	sc := bufio.NewScanner(stderr)
	authURL := ""
	for sc.Scan() {
		loginErr.WriteString(sc.Text() + "\n")
		if u, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "http"); ok && authURL == "" {
			authURL = "http" + u
			break
		}
	}
	if authURL == "" {
		login.Wait()
		t.Fatalf("auth login printed no authorization URL:\n%s", loginErr.String())
	}
	if !strings.Contains(authURL, "code_challenge_method=S256") || !strings.Contains(authURL, "resource=") {
		t.Fatalf("authorization URL without PKCE or resource indicator: %s", authURL)
	}
	go func() {
		for sc.Scan() {
			loginErr.WriteString(sc.Text() + "\n")
		}
	}()
	// The browser: follow the redirects, through the provider's login
	// page, back to toolgate's loopback listener.
	resp, err := http.Get(authURL)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "logged in") {
		t.Fatalf("browser ended at %s: %d %s", resp.Request.URL, resp.StatusCode, page)
	}
	if err := login.Wait(); err != nil {
		t.Fatalf("auth login: %v\n%s\n%s", err, stdout.String(), loginErr.String())
	}
	t.Logf("auth login: %s", stdout.String())
	if !strings.Contains(stdout.String(), "logged in to vault (registered client") || !strings.Contains(stdout.String(), "refreshed automatically") || !strings.Contains(stdout.String(), "lists 1 tools") {
		t.Fatalf("auth login output: %s", stdout.String())
	}

	// The store: a 0600 key, and the credential decrypts with it.
	st, err := os.Stat(filepath.Join(state, "oauth", "key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("oauth key file: %v %v", st, err)
	}
	cred, err := oauthclient.OpenStore(state).Load("vault")
	if err != nil {
		t.Fatal(err)
	}
	loginAccess, loginRefresh := cred.Token.AccessToken, cred.Token.RefreshToken
	if loginAccess == "" || loginRefresh == "" {
		t.Fatalf("login stored no access or refresh token")
	}

	status, err := exec.CommandContext(ctxT(t), binPath, "auth", "status", "--state-dir", state, "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("auth status: %v %s", err, status)
	}
	var rows []map[string]any
	if err := json.Unmarshal(status, &rows); err != nil || len(rows) != 1 || rows[0]["server"] != "vault" || rows[0]["refresh_token"] != true || rows[0]["registered"] != true {
		t.Fatalf("auth status: %s", status)
	}

	// The gateway uses the login, refreshing the token first.
	g := startHTTP(t, cfgPath, "--state-dir", state, "--log-level", "debug")
	cs := connectHTTP(t, g.URL, "")
	var outputs []string
	for i := range 2 {
		res := call(t, cs, "search_tools", map[string]any{"query": "which vault account", "top_k": 1})
		outputs = append(outputs, text(res))
		res = call(t, cs, "call_tool", map[string]any{"tool_name": "vault__whoami", "arguments": map[string]any{}, "discovery_token": discoveryToken(t, res)})
		outputs = append(outputs, text(res))
		wantOK(t, "call with the login, round "+string(rune('1'+i)), res, "vault account: test-user2")
	}
	var refreshes int
	getJSON(t, issuer+"/test/refreshes", &refreshes)
	// The first requests the server saw are the login's own.
	seen := vault.tokens()
	fresh := 0
	for _, tok := range seen {
		if tok != loginAccess {
			fresh++
		}
	}
	if refreshes == 0 || fresh == 0 {
		t.Fatalf("no refresh before expiry: %d refresh grants, %d of %d upstream requests with a new token", refreshes, fresh, len(seen))
	}
	rotated, err := oauthclient.OpenStore(state).Load("vault")
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Token.RefreshToken == loginRefresh || rotated.Token.AccessToken == loginAccess {
		t.Fatalf("the refreshed (rotated) tokens were not saved")
	}
	t.Logf("%d refresh grants; %d upstream requests, %d with a refreshed token", refreshes, len(seen), fresh)

	// Logout: the gateway stops sending the token from its next request.
	out, err := exec.CommandContext(ctxT(t), binPath, "auth", "logout", "vault", "--state-dir", state).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "logged out of vault") {
		t.Fatalf("auth logout: %v %s", err, out)
	}
	status, _ = exec.CommandContext(ctxT(t), binPath, "auth", "status", "--state-dir", state).CombinedOutput()
	if !strings.Contains(string(status), "no logins stored") {
		t.Fatalf("auth status after logout: %s", status)
	}

	// The canary: no token the login or a refresh produced appears in
	// anything but the encrypted store.
	secrets := []string{loginAccess, loginRefresh, rotated.Token.AccessToken, rotated.Token.RefreshToken}
	places := map[string]string{
		"gateway log":       g.Logs.String(),
		"auth login output": stdout.String() + loginErr.String(),
		"auth status":       string(status),
		"model results":     strings.Join(outputs, "\n"),
	}
	err = filepath.WalkDir(state, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if filepath.Base(filepath.Dir(p)) == "oauth" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		places["state file "+p] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for where, content := range places {
		for i, s := range secrets {
			if strings.Contains(content, s) {
				t.Fatalf("token %d (access/refresh) leaked into the %s", i, where)
			}
		}
	}
	noPanic(t, g.Logs.String())
}
