package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
)

const audience = "https://gateway.example/mcp"

// issuer is a minimal OpenID provider for unit tests: discovery document
// and JWKS over HTTP, and a signer. The e2e tests use a real provider.
type issuer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	keys    []jwk.Key // public keys published
	fetches atomic.Int32
}

func newIssuer(t testing.TB) *issuer {
	is := &issuer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": is.srv.URL, "jwks_uri": is.srv.URL + "/keys"})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		set := jwk.NewSet()
		for _, k := range is.keys {
			_ = set.AddKey(k)
		}
		_ = json.NewEncoder(w).Encode(set)
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

type signingKey struct {
	priv any
	alg  jwa.SignatureAlgorithm
	kid  string
}

// addRSA makes an RSA key, publishes it (unless hidden) and returns it.
func (is *issuer) addRSA(t testing.TB, kid string, publish bool) signingKey {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if publish {
		is.publish(t, &priv.PublicKey, kid, "RS256")
	}
	return signingKey{priv: priv, alg: jwa.RS256(), kid: kid}
}

func (is *issuer) addEC(t testing.TB, kid string) signingKey {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is.publish(t, &priv.PublicKey, kid, "ES256")
	return signingKey{priv: priv, alg: jwa.ES256(), kid: kid}
}

func (is *issuer) publish(t testing.TB, pub any, kid, alg string) {
	k, err := jwk.Import(pub)
	if err != nil {
		t.Fatal(err)
	}
	_ = k.Set(jwk.KeyIDKey, kid)
	_ = k.Set(jwk.AlgorithmKey, alg)
	_ = k.Set(jwk.KeyUsageKey, "sig")
	is.mu.Lock()
	is.keys = append(is.keys, k)
	is.mu.Unlock()
}

func (is *issuer) claims(sub string, extra map[string]any) map[string]any {
	c := map[string]any{
		"iss": is.srv.URL, "sub": sub, "aud": audience,
		"exp": time.Now().Add(5 * time.Minute).Unix(), "iat": time.Now().Unix(),
		"scope": "mcp", "groups": []string{"dev"},
	}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

func sign(t testing.TB, k signingKey, claims map[string]any) string {
	payload, _ := json.Marshal(claims)
	hdr := jws.NewHeaders()
	_ = hdr.Set(jws.KeyIDKey, k.kid)
	_ = hdr.Set(jws.TypeKey, "at+jwt")
	out, err := jws.Sign(payload, jws.WithKey(k.alg, k.priv, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// rawToken builds a compact JWS from a header and claims with the given
// signature bytes, for forgeries no library would sign.
func rawToken(hdr, claims map[string]any, sig []byte) (string, string) {
	h, _ := json.Marshal(hdr)
	c, _ := json.Marshal(claims)
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	return input, input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func newAuth(t testing.TB, is *issuer, now func() time.Time, keys ...config.APIKey) *Authenticator {
	cfg := &config.Auth{APIKeys: keys}
	if is != nil {
		cfg.OIDC = &config.OIDC{Issuer: is.srv.URL, Audience: audience, RequiredScopes: []string{"mcp"}, GroupsClaim: "groups", Algorithms: config.DefaultAlgorithms}
	}
	a, err := New(cfg, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func hashKey(k string) string {
	s := sha256.Sum256([]byte(k))
	return hex.EncodeToString(s[:])
}

func TestOIDCTokens(t *testing.T) {
	is := newIssuer(t)
	good := is.addRSA(t, "k1", true)
	ec := is.addEC(t, "k2")
	hidden := is.addRSA(t, "k9", false)
	a := newAuth(t, is, nil)

	p, err := a.Authenticate(context.Background(), sign(t, good, is.claims("alice", nil)))
	if err != nil {
		t.Fatalf("valid token refused: %v", err)
	}
	if p.Subject != "alice" || p.Issuer != is.srv.URL || !p.InGroup("dev") || !p.HasScope("mcp") || p.Claims["sub"] != "alice" {
		t.Fatalf("principal %+v", p)
	}
	if p.ID() != is.srv.URL+"|alice" {
		t.Fatalf("ID %q", p.ID())
	}
	if _, err := a.Authenticate(context.Background(), sign(t, ec, is.claims("bob", map[string]any{"aud": []string{"other", audience}}))); err != nil {
		t.Fatalf("ES256 token with aud list refused: %v", err)
	}

	pub := good.priv.(*rsa.PrivateKey).PublicKey
	pubDER, _ := x509.MarshalPKIXPublicKey(&pub)
	_, none := rawToken(map[string]any{"alg": "none", "kid": "k1"}, is.claims("alice", nil), nil)
	hsInput, _ := rawToken(map[string]any{"alg": "HS256", "kid": "k1"}, is.claims("alice", nil), nil)
	hsToken := hsInput + "." + base64.RawURLEncoding.EncodeToString(hmacSHA256(pubDER, hsInput))

	valid := sign(t, good, is.claims("alice", nil))
	parts := strings.Split(valid, ".")
	tamperedClaims, _ := json.Marshal(is.claims("root", nil))
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(tamperedClaims) + "." + parts[2]

	for _, tc := range []struct {
		name, token, want string
	}{
		{"expired", sign(t, good, is.claims("alice", map[string]any{"exp": time.Now().Add(-2 * time.Minute).Unix()})), "expired"},
		{"not yet valid", sign(t, good, is.claims("alice", map[string]any{"nbf": time.Now().Add(2 * time.Minute).Unix()})), "not valid yet"},
		{"no exp", sign(t, good, is.claims("alice", map[string]any{"exp": nil})), "no exp"},
		{"no sub", sign(t, good, is.claims("", nil)), "no sub"},
		{"wrong audience", sign(t, good, is.claims("alice", map[string]any{"aud": "https://other.example/mcp"})), "not for this resource"},
		{"no audience", sign(t, good, is.claims("alice", map[string]any{"aud": nil})), "not for this resource"},
		{"wrong issuer", sign(t, good, is.claims("alice", map[string]any{"iss": "https://evil.example"})), "issuer"},
		{"tampered", tampered, "bad signature"},
		{"alg none", none, `"none" not accepted`},
		{"HS256 with the public key", hsToken, `"HS256" not accepted`},
		{"unknown kid", sign(t, hidden, is.claims("alice", nil)), "unknown key id"},
		{"id token type", signTyp(t, good, "JOSE+JSON", is.claims("alice", nil)), "not an access token"},
		{"garbage", "a.b.c", "malformed header"},
		{"not a jwt", "just-a-string", "unknown token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.Authenticate(context.Background(), tc.token)
			if !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want invalid token: %s", err, tc.want)
			}
		})
	}
}

func signTyp(t testing.TB, k signingKey, typ string, claims map[string]any) string {
	payload, _ := json.Marshal(claims)
	hdr := jws.NewHeaders()
	_ = hdr.Set(jws.KeyIDKey, k.kid)
	_ = hdr.Set(jws.TypeKey, typ)
	out, err := jws.Sign(payload, jws.WithKey(k.alg, k.priv, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// A key rotated in at the provider is picked up on its first token, but
// a flood of unknown kids fetches the key set at most once per minRefresh.
func TestKeyRotationAndRefreshLimit(t *testing.T) {
	is := newIssuer(t)
	k1 := is.addRSA(t, "k1", true)
	var now atomic.Int64
	now.Store(time.Now().Unix())
	clock := func() time.Time { return time.Unix(now.Load(), 0) }
	a := newAuth(t, is, clock)
	if _, err := a.Authenticate(context.Background(), sign(t, k1, is.claims("alice", nil))); err != nil {
		t.Fatal(err)
	}
	if n := is.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches after the first token; want 1", n)
	}
	stranger := is.addRSA(t, "nope", false)
	for range 50 {
		if _, err := a.Authenticate(context.Background(), sign(t, stranger, is.claims("alice", nil))); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("unknown kid: %v", err)
		}
	}
	if n := is.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches after 50 unknown kids within %v; want 1 (the refresh is rate limited)", n, minRefresh)
	}
	// The provider rotates: k2 is published; after minRefresh the first
	// token signed with it makes the gateway fetch the new set.
	k2 := is.addRSA(t, "k2", true)
	now.Add(int64(minRefresh/time.Second) + 1)
	if _, err := a.Authenticate(context.Background(), sign(t, k2, is.claims("alice", nil))); err != nil {
		t.Fatalf("token signed with the rotated-in key: %v", err)
	}
	if n := is.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches; want 2", n)
	}
}

func TestDiscoveryIssuerMismatch(t *testing.T) {
	is := newIssuer(t)
	k := is.addRSA(t, "k1", true)
	// The provider's document is for is.srv.URL; configure a different
	// spelling of it and the keys must not be trusted.
	cfg := &config.Auth{OIDC: &config.OIDC{Issuer: strings.Replace(is.srv.URL, "127.0.0.1", "localhost", 1), Audience: audience, GroupsClaim: "groups", Algorithms: config.DefaultAlgorithms}}
	a, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Authenticate(context.Background(), sign(t, k, is.claims("alice", map[string]any{"iss": cfg.OIDC.Issuer})))
	if err == nil || errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "names issuer") {
		t.Fatalf("got %v; want a discovery error naming the issuer mismatch", err)
	}
}

func TestAPIKeys(t *testing.T) {
	a := newAuth(t, nil, nil,
		config.APIKey{Principal: "alice", Groups: []string{"dev"}, SHA256: hashKey("alice-key")},
		config.APIKey{Principal: "ops", Scopes: []string{"metrics"}, SHA256: hashKey("ops-key")})
	p, err := a.Authenticate(context.Background(), "alice-key")
	if err != nil || p.ID() != "alice" || !p.InGroup("dev") || p.Issuer != extension.APIKeyIssuer {
		t.Fatalf("alice: %+v %v", p, err)
	}
	p, err = a.Authenticate(context.Background(), "ops-key")
	if err != nil || p.ID() != "ops" || !p.HasScope("metrics") {
		t.Fatalf("ops: %+v %v", p, err)
	}
	for _, bad := range []string{"alice-key ", "Alice-key", "", hashKey("alice-key"), "x.y.z"} {
		if _, err := a.Authenticate(context.Background(), bad); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("%q: %v; want invalid token", bad, err)
		}
	}
}

func TestRequireHTTP(t *testing.T) {
	is := newIssuer(t)
	k := is.addRSA(t, "k1", true)
	a := newAuth(t, is, nil, config.APIKey{Principal: "ops-bot", Groups: []string{"metrics"}, SHA256: hashKey("ops-key")},
		config.APIKey{Principal: "dev-bot", SHA256: hashKey("dev-key")})
	var seen *extension.Principal
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = extension.PrincipalFrom(r.Context()) })
	mcpH := a.Require(Requirement{Scopes: []string{"mcp"}}, ok)
	opsH := a.Require(Requirement{AnyOf: MetricsScope}, ok)
	md := `resource_metadata="https://gateway.example/.well-known/oauth-protected-resource/mcp"`
	do := func(h http.Handler, auth string) *httptest.ResponseRecorder {
		seen = nil
		r := httptest.NewRequest("POST", "/mcp", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for _, tc := range []struct {
		name   string
		h      http.Handler
		auth   string
		status int
		header []string
		who    string
	}{
		{"no token", mcpH, "", 401, []string{md}, ""},
		{"basic auth", mcpH, "Basic YTpi", 401, []string{md}, ""},
		{"bad token", mcpH, "Bearer nope", 401, []string{`error="invalid_token"`, md}, ""},
		{"good token", mcpH, "Bearer " + sign(t, k, is.claims("alice", nil)), 200, nil, is.srv.URL + "|alice"},
		{"lower-case scheme", mcpH, "bearer " + sign(t, k, is.claims("alice", nil)), 200, nil, is.srv.URL + "|alice"},
		{"missing scope", mcpH, "Bearer " + sign(t, k, is.claims("alice", map[string]any{"scope": "openid"})), 403, []string{`error="insufficient_scope"`, `scope="mcp"`, md}, ""},
		{"api key", mcpH, "Bearer dev-key", 200, nil, "dev-bot"},
		{"status without metrics", opsH, "Bearer dev-key", 403, []string{`error="insufficient_scope"`, `scope="metrics"`}, ""},
		{"status by group", opsH, "Bearer ops-key", 200, nil, "ops-bot"},
		{"status by scope", opsH, "Bearer " + sign(t, k, is.claims("carol", map[string]any{"scope": "mcp metrics"})), 200, nil, is.srv.URL + "|carol"},
		{"status token without", opsH, "Bearer " + sign(t, k, is.claims("alice", nil)), 403, []string{`error="insufficient_scope"`}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(tc.h, tc.auth)
			if w.Code != tc.status {
				t.Fatalf("status %d; want %d (%s)", w.Code, tc.status, w.Body)
			}
			got := w.Header().Get("WWW-Authenticate")
			for _, want := range tc.header {
				if !strings.HasPrefix(got, "Bearer ") || !strings.Contains(got, want) {
					t.Fatalf("WWW-Authenticate %q; want %s", got, want)
				}
			}
			if seen.ID() != tc.who {
				t.Fatalf("principal %q; want %q", seen.ID(), tc.who)
			}
		})
	}
}

// A provider that cannot be reached is not a bad token: the caller gets
// 503, not a 401 that would send it to log in again.
func TestProviderDown(t *testing.T) {
	is := newIssuer(t)
	k := is.addRSA(t, "k1", true)
	a := newAuth(t, is, nil)
	tok := sign(t, k, is.claims("alice", nil))
	is.srv.Close()
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	a.Require(Requirement{}, http.NotFoundHandler()).ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d; want 503", w.Code)
	}
}

func TestMetadata(t *testing.T) {
	is := newIssuer(t)
	a := newAuth(t, is, nil)
	w := httptest.NewRecorder()
	a.MetadataHandler().ServeHTTP(w, httptest.NewRequest("GET", MetadataPath+"/mcp", nil))
	var md map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &md); err != nil {
		t.Fatal(err)
	}
	if md["resource"] != audience || md["authorization_servers"].([]any)[0] != is.srv.URL {
		t.Fatalf("metadata %v", md)
	}
	if got := a.ResourceMetadataURL(); got != "https://gateway.example/.well-known/oauth-protected-resource/mcp" {
		t.Fatalf("metadata URL %q", got)
	}
	if newAuth(t, nil, nil, config.APIKey{Principal: "a", SHA256: hashKey("k")}).MetadataHandler() != nil {
		t.Fatal("metadata served without OIDC")
	}
}

// A verified token is remembered only until it expires.
func TestCacheHonoursExpiry(t *testing.T) {
	is := newIssuer(t)
	k := is.addRSA(t, "k1", true)
	start := time.Now()
	var off atomic.Int64
	a := newAuth(t, is, func() time.Time { return start.Add(time.Duration(off.Load())) })
	tok := sign(t, k, is.claims("alice", map[string]any{"exp": start.Add(10 * time.Second).Unix()}))
	if _, err := a.Authenticate(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(context.Background(), tok); err != nil {
		t.Fatalf("second use: %v", err)
	}
	off.Store(int64(10*time.Second + Leeway + 2*time.Second))
	if _, err := a.Authenticate(context.Background(), tok); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired token served from the cache: %v", err)
	}
}

// BenchmarkVerifyCachedJWKS measures validating one access token with
// the key set already fetched: the latency auth adds to every HTTP
// request. "repeat" is a client sending the same token on each request
// (the verified-token cache answers); "signature" checks the signature
// and claims every time (a new token).
func BenchmarkVerifyCachedJWKS(b *testing.B) {
	b.Run("repeat", benchRepeat)
	b.Run("signature", benchSignature)
}

func benchSignature(b *testing.B) {
	for _, alg := range []string{"RS256", "ES256"} {
		b.Run(alg, func(b *testing.B) {
			is := newIssuer(b)
			var k signingKey
			if alg == "RS256" {
				k = is.addRSA(b, "k1", true)
			} else {
				k = is.addEC(b, "k1")
			}
			a := newAuth(b, is, nil)
			tok := sign(b, k, is.claims("alice", nil))
			if _, err := a.Authenticate(context.Background(), tok); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := a.oidc.verifyUncached(context.Background(), tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchRepeat(b *testing.B) {
	for _, alg := range []string{"RS256", "ES256"} {
		b.Run(alg, func(b *testing.B) {
			is := newIssuer(b)
			var k signingKey
			if alg == "RS256" {
				k = is.addRSA(b, "k1", true)
			} else {
				k = is.addEC(b, "k1")
			}
			a := newAuth(b, is, nil)
			tok := sign(b, k, is.claims("alice", nil))
			if _, err := a.Authenticate(context.Background(), tok); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := a.Authenticate(context.Background(), tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func hmacSHA256(key []byte, input string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(input))
	return m.Sum(nil)
}
