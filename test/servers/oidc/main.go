// Command oidc is a real OpenID provider for toolgate's end-to-end tests,
// built on zitadel/oidc's op package (a certified OpenID provider
// library) with its example in-memory storage. Clients registered by the
// -clients flag get JWT access tokens by the client credentials grant,
// with their groups and the granted scopes as claims and the configured
// audience as "aud".
//
// It is its own Go module so that the provider library's dependencies
// stay out of toolgate's go.mod.
//
// Usage:
//
//	oidc -clients '[{"id":"alice","secret":"s","groups":["dev"],"audience":"http://127.0.0.1:8787/mcp"}]'
//
// It listens on a free loopback port and prints "ISSUER http://127.0.0.1:PORT".
package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// clientSpec is one -clients entry.
type clientSpec struct {
	ID       string   `json:"id"`
	Secret   string   `json:"secret"`
	Groups   []string `json:"groups"`
	Audience string   `json:"audience"`
	// TTL is the token lifetime in seconds (default 300); negative issues
	// tokens that are already expired.
	TTL int `json:"ttl"`
}

// store is the example storage with service clients of our own: JWT
// access tokens, an audience per client, groups and scope claims.
type store struct {
	*storage.Storage
	clients map[string]*client
}

func (s *store) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	c, ok := s.clients[id]
	if !ok || c.spec.Secret != secret {
		return nil, errors.New("wrong client id or secret")
	}
	return c, nil
}

func (s *store) ClientCredentialsTokenRequest(ctx context.Context, id string, scopes []string) (op.TokenRequest, error) {
	c, ok := s.clients[id]
	if !ok {
		return nil, errors.New("unknown client")
	}
	return &oidc.JWTTokenRequest{Subject: id, Audience: []string{c.spec.Audience}, Scopes: scopes}, nil
}

func (s *store) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	id, exp, err := s.Storage.CreateAccessToken(ctx, req)
	if c, ok := s.clients[req.GetSubject()]; ok && c.spec.TTL != 0 {
		exp = time.Now().Add(time.Duration(c.spec.TTL) * time.Second)
	}
	return id, exp, err
}

func (s *store) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	claims := map[string]any{"scope": strings.Join(scopes, " ")}
	if c, ok := s.clients[clientID]; ok && len(c.spec.Groups) > 0 {
		claims["groups"] = c.spec.Groups
	}
	return claims, nil
}

// client is a confidential service client using the client credentials
// grant and JWT access tokens.
type client struct{ spec clientSpec }

func (c *client) GetID() string                       { return c.spec.ID }
func (c *client) RedirectURIs() []string              { return nil }
func (c *client) PostLogoutRedirectURIs() []string    { return nil }
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c *client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c *client) ResponseTypes() []oidc.ResponseType  { return nil }
func (c *client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}
func (c *client) LoginURL(string) string               { return "" }
func (c *client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (c *client) IDTokenLifetime() time.Duration       { return time.Hour }
func (c *client) DevMode() bool                        { return true }
func (c *client) IsScopeAllowed(string) bool           { return true }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *client) ClockSkew() time.Duration             { return 0 }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

func main() {
	clientsJSON := flag.String("clients", "[]", "JSON list of clients")
	flag.Parse()
	var specs []clientSpec
	if err := json.Unmarshal([]byte(*clientsJSON), &specs); err != nil {
		log.Fatalf("oidc: -clients: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()
	s := &store{Storage: storage.NewStorage(storage.NewUserStore(issuer)), clients: map[string]*client{}}
	for _, sp := range specs {
		s.clients[sp.ID] = &client{spec: sp}
	}
	cfg := &op.Config{CryptoKey: sha256.Sum256([]byte("toolgate-e2e")), SupportedScopes: []string{"openid", "mcp", "metrics"}}
	provider, err := op.NewOpenIDProvider(issuer, cfg, s, op.WithAllowInsecure())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ISSUER", issuer)
	log.Fatal(http.Serve(ln, provider))
}
