package auth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/config"
)

// TestIntrospection runs answers of an RFC 7662 endpoint through the
// checks, and shows that a good answer is cached briefly.
func TestIntrospection(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	answers := map[string]map[string]any{
		"good":      {"active": true, "sub": "alice", "aud": []string{"https://gw/mcp"}, "iss": "https://id.example", "scope": "mcp", "groups": []string{"dev"}, "exp": now.Add(time.Hour).Unix()},
		"no-aud":    {"active": true, "sub": "bob", "scope": "mcp"},
		"inactive":  {"active": false},
		"other-aud": {"active": true, "sub": "alice", "aud": "https://other/mcp"},
		"other-iss": {"active": true, "sub": "alice", "iss": "https://evil.example"},
		"expired":   {"active": true, "sub": "alice", "exp": now.Add(-time.Hour).Unix()},
		"no-sub":    {"active": true},
	}
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if id, secret, ok := r.BasicAuth(); !ok || id != "https%3A%2F%2Fgw%2Fmcp" || secret != "s%26cret" {
			http.Error(w, "bad client", http.StatusUnauthorized)
			return
		}
		if r.FormValue("token_type_hint") != "access_token" {
			http.Error(w, "hint", http.StatusBadRequest)
			return
		}
		a, ok := answers[r.FormValue("token")]
		if !ok {
			a = map[string]any{"active": false}
		}
		json.NewEncoder(w).Encode(a)
	}))
	defer srv.Close()
	cfg := &config.Auth{OIDC: &config.OIDC{Issuer: "https://id.example", Audience: "https://gw/mcp", GroupsClaim: "groups",
		Algorithms: config.DefaultAlgorithms, Introspection: &config.Introspection{URL: srv.URL, ClientID: "https://gw/mcp", ClientSecret: "s&cret"}}}
	a, err := New(cfg, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Authenticate(context.Background(), "good")
	if err != nil || p.Subject != "alice" || !p.InGroup("dev") || !p.HasScope("mcp") || p.Issuer != "https://id.example" {
		t.Fatalf("good: %+v %v", p, err)
	}
	if p, err := a.Authenticate(context.Background(), "no-aud"); err != nil || p.Subject != "bob" {
		t.Fatalf("an answer without aud (optional in RFC 7662): %+v %v", p, err)
	}
	for _, tok := range []string{"inactive", "other-aud", "other-iss", "expired", "no-sub", "unknown"} {
		if _, err := a.Authenticate(context.Background(), tok); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: %v; want invalid token", tok, err)
		}
	}
	before := calls.Load()
	if _, err := a.Authenticate(context.Background(), "good"); err != nil || calls.Load() != before {
		t.Fatalf("a good answer is not cached: %v, %d calls", err, calls.Load()-before)
	}
	// The endpoint refusing toolgate's client is not the caller's fault:
	// the gateway cannot decide (503), it does not call the token bad.
	cfg.OIDC.Introspection.ClientSecret = "wrong"
	a, _ = New(cfg, Options{Now: func() time.Time { return now }})
	if _, err := a.Authenticate(context.Background(), "good"); err == nil || errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("endpoint refusing toolgate: %v", err)
	}
}
