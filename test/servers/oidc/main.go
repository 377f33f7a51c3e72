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
//
// For the authorization code flow (toolgate auth login) it also offers
// dynamic client registration (RFC 7591) at /register, advertised in its
// metadata, for public native clients (PKCE, refresh tokens, opaque
// access tokens lasting -code-ttl seconds), and a login page that signs
// in the example user test-user2 at once, so a test can play the
// browser by following redirects. It counts refresh grants at
// /test/refreshes.
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
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

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
	// Opaque issues opaque access tokens, to be checked by introspection
	// (RFC 7662), instead of JWTs.
	Opaque bool `json:"opaque"`
}

// issued is what the provider remembers of an access token for a
// -clients client, for introspection.
type issued struct {
	subject string
	aud     []string
	scopes  []string
	groups  []string
	exp     time.Time
}

// store is the example storage with service clients of our own: JWT
// access tokens, an audience per client, groups and scope claims.
type store struct {
	*storage.Storage
	clients map[string]*client

	codeTTL time.Duration

	mu         sync.Mutex
	registered map[string]*nativeClient
	issued     map[string]issued // access token id → what it was issued for
}

// AuthorizeClientIDSecret authenticates -clients clients at the
// introspection endpoint (a resource server is such a client).
func (s *store) AuthorizeClientIDSecret(ctx context.Context, id, secret string) error {
	if c, ok := s.clients[id]; ok {
		if c.spec.Secret != secret {
			return errors.New("wrong client id or secret")
		}
		return nil
	}
	return s.Storage.AuthorizeClientIDSecret(ctx, id, secret)
}

// SetIntrospectionFromToken answers for tokens of -clients clients: like
// the example storage, only to a client the token's audience names.
func (s *store) SetIntrospectionFromToken(ctx context.Context, resp *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	s.mu.Lock()
	t, ok := s.issued[tokenID]
	s.mu.Unlock()
	if !ok {
		return s.Storage.SetIntrospectionFromToken(ctx, resp, tokenID, subject, clientID)
	}
	if time.Now().After(t.exp) {
		return errors.New("token is expired")
	}
	for _, a := range t.aud {
		if a == clientID {
			resp.Subject, resp.Audience, resp.Scope, resp.Expiration = t.subject, t.aud, t.scopes, oidc.FromTime(t.exp)
			resp.ClientID = t.subject
			if len(t.groups) > 0 {
				resp.Claims = map[string]any{"groups": t.groups}
			}
			return nil
		}
	}
	return errors.New("token is not valid for this client")
}

func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	s.mu.Lock()
	c, ok := s.registered[id]
	s.mu.Unlock()
	if ok {
		return c, nil
	}
	return s.Storage.GetClientByClientID(ctx, id)
}

// CreateAccessAndRefreshTokens shortens the lifetime the client is told
// (expires_in), so a test sees tokens needing a refresh soon.
func (s *store) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	id, rt, exp, err := s.Storage.CreateAccessAndRefreshTokens(ctx, req, current)
	if err == nil && s.codeTTL > 0 {
		exp = time.Now().Add(s.codeTTL)
	}
	return id, rt, exp, err
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
	c, ok := s.clients[req.GetSubject()]
	if ok && c.spec.TTL != 0 {
		exp = time.Now().Add(time.Duration(c.spec.TTL) * time.Second)
	}
	if ok && err == nil {
		s.mu.Lock()
		s.issued[id] = issued{subject: req.GetSubject(), aud: req.GetAudience(), scopes: req.GetScopes(), groups: c.spec.Groups, exp: exp}
		s.mu.Unlock()
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
func (c *client) LoginURL(string) string { return "" }
func (c *client) AccessTokenType() op.AccessTokenType {
	if c.spec.Opaque {
		return op.AccessTokenTypeBearer
	}
	return op.AccessTokenTypeJWT
}
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

// nativeClient is a client registered at /register: public, PKCE,
// loopback redirects, refresh tokens.
type nativeClient struct {
	client
	redirects []string
}

func (c *nativeClient) RedirectURIs() []string              { return c.redirects }
func (c *nativeClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeNative }
func (c *nativeClient) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodNone }
func (c *nativeClient) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *nativeClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
}
func (c *nativeClient) LoginURL(id string) string           { return "/login?id=" + id }
func (c *nativeClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeBearer }

// register is RFC 7591 dynamic client registration for public clients.
func (s *store) register(w http.ResponseWriter, r *http.Request) {
	var md struct {
		RedirectURIs []string `json:"redirect_uris"`
		ClientName   string   `json:"client_name"`
	}
	if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&md) != nil || len(md.RedirectURIs) == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client_metadata"})
		return
	}
	c := &nativeClient{client: client{spec: clientSpec{ID: uuid.NewString()}}, redirects: md.RedirectURIs}
	s.mu.Lock()
	s.registered[c.spec.ID] = c
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]any{
		"client_id": c.spec.ID, "client_id_issued_at": time.Now().Unix(), "client_name": md.ClientName,
		"redirect_uris": md.RedirectURIs, "token_endpoint_auth_method": "none",
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
	})
}

// withRegistration adds registration_endpoint to the provider's metadata,
// also served as RFC 8414 authorization server metadata.
func withRegistration(issuer string, provider http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/openid-configuration" && r.URL.Path != "/.well-known/oauth-authorization-server" {
			provider.ServeHTTP(w, r)
			return
		}
		rec := &recorder{header: http.Header{}}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/.well-known/openid-configuration"
		provider.ServeHTTP(rec, r2)
		var md map[string]any
		if err := json.Unmarshal(rec.body, &md); err != nil {
			http.Error(w, "metadata", http.StatusInternalServerError)
			return
		}
		md["registration_endpoint"] = issuer + "/register"
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(md)
	})
}

type recorder struct {
	header http.Header
	body   []byte
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { r.body = append(r.body, b...); return len(b), nil }
func (r *recorder) WriteHeader(int)             {}

func main() {
	clientsJSON := flag.String("clients", "[]", "JSON list of clients")
	codeTTL := flag.Int("code-ttl", 0, "lifetime in seconds told to clients of the authorization code flow (0: the storage's 5 minutes)")
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
	s := &store{Storage: storage.NewStorage(storage.NewUserStore(issuer)), clients: map[string]*client{},
		codeTTL: time.Duration(*codeTTL) * time.Second, registered: map[string]*nativeClient{}, issued: map[string]issued{}}
	for _, sp := range specs {
		s.clients[sp.ID] = &client{spec: sp}
	}
	cfg := &op.Config{CryptoKey: sha256.Sum256([]byte("toolgate-e2e")), SupportedScopes: []string{"openid", "mcp", "metrics", "offline_access"}, CodeMethodS256: true, GrantTypeRefreshToken: true}
	provider, err := op.NewOpenIDProvider(issuer, cfg, s, op.WithAllowInsecure())
	if err != nil {
		log.Fatal(err)
	}
	var refreshes atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/register", s.register)
	// The login page: the example user signs in at once, and the browser
	// goes back to the provider to finish the authorization request.
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		if err := s.CheckUsernamePassword("test-user2", "verysecure", id); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		http.Redirect(w, r, op.AuthCallbackURL(provider)(r.Context(), id), http.StatusFound)
	})
	mux.HandleFunc("/test/refreshes", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, refreshes.Load())
	})
	md := withRegistration(issuer, provider)
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth/token" && r.Method == http.MethodPost {
			if r.ParseForm() == nil && r.PostForm.Get("grant_type") == "refresh_token" {
				refreshes.Add(1)
			}
		}
		md.ServeHTTP(w, r)
	}))
	fmt.Println("ISSUER", issuer)
	log.Fatal(http.Serve(ln, mux))
}
