package auth

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
)

const (
	// maxTokenBytes bounds a presented token; real access tokens are a
	// few KiB.
	maxTokenBytes = 16 << 10
	// maxDocBytes bounds the discovery document and the key set.
	maxDocBytes = 1 << 20
	// minRefresh is the least time between two fetches of the key set:
	// a token with an unknown kid makes the gateway look again for a
	// rotated key, but a flood of made-up kids cannot make it hammer the
	// provider.
	minRefresh = 30 * time.Second
	// maxKeyAge is how long a fetched key set is used before it is
	// fetched again (a failed fetch keeps the old set).
	maxKeyAge = time.Hour
)

// oidcVerifier validates JWT access tokens from one issuer.
type oidcVerifier struct {
	cfg    *config.OIDC
	client *http.Client
	log    *slog.Logger
	now    func() time.Time
	algs   map[string]jwa.SignatureAlgorithm

	keys atomic.Pointer[keySet]
	// mu serialises fetches; lastTry is when the last one started.
	mu      sync.Mutex
	lastTry time.Time
	jwksURI string

	cache *tokenCache
}

// keySet is one fetch of the provider's keys.
type keySet struct {
	byKID   map[string]verifyKey
	only    *verifyKey // the one key, when the set has exactly one
	fetched time.Time
}

type verifyKey struct {
	raw any    // the public key, exported once for fast verification
	alg string // the key's own "alg", when the JWK names one
}

func newOIDCVerifier(cfg *config.OIDC, opts Options) (*oidcVerifier, error) {
	v := &oidcVerifier{cfg: cfg, client: opts.HTTPClient, log: opts.Logger, now: opts.Now, algs: map[string]jwa.SignatureAlgorithm{}, cache: newTokenCache()}
	for _, name := range cfg.Algorithms {
		alg, ok := jwa.LookupSignatureAlgorithm(name)
		if !ok || strings.HasPrefix(name, "HS") || name == "none" {
			return nil, fmt.Errorf("auth.oidc: algorithm %q not supported", name)
		}
		v.algs[name] = alg
	}
	return v, nil
}

func looksLikeJWT(token string) bool {
	return strings.Count(token, ".") == 2
}

// header is the part of a JWS protected header the gateway reads before
// verifying. jws.VerifyCompactFast refuses "crit" and "b64" itself.
type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

func (v *oidcVerifier) verify(ctx context.Context, token string) (*extension.Principal, error) {
	if len(token) > maxTokenBytes {
		return nil, invalid("token longer than %d bytes", maxTokenBytes)
	}
	sum := sha256.Sum256([]byte(token))
	if p := v.cache.get(sum, v.now()); p != nil {
		return p, nil
	}
	p, err := v.verifyUncached(ctx, token)
	if err != nil {
		return nil, err
	}
	v.cache.put(sum, p, v.now(), cacheTTL)
	return p, nil
}

func (v *oidcVerifier) verifyUncached(ctx context.Context, token string) (*extension.Principal, error) {
	enc, _, _ := strings.Cut(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil, invalid("malformed header")
	}
	var h header
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, invalid("malformed header")
	}
	alg, ok := v.algs[h.Alg]
	if !ok {
		return nil, invalid("algorithm %q not accepted", h.Alg)
	}
	switch strings.ToLower(h.Typ) {
	case "", "jwt", "at+jwt", "application/at+jwt":
	default:
		return nil, invalid("token type %q is not an access token", h.Typ)
	}
	key, err := v.key(ctx, h.Kid)
	if err != nil {
		return nil, err
	}
	if key.alg != "" && key.alg != h.Alg {
		return nil, invalid("algorithm %q does not match the key's %q", h.Alg, key.alg)
	}
	payload, err := jws.VerifyCompactFast(key.raw, []byte(token), alg)
	if err != nil {
		return nil, invalid("bad signature")
	}
	return v.claims(payload)
}

// claims checks a verified payload and builds the principal.
func (v *oidcVerifier) claims(payload []byte) (*extension.Principal, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var c map[string]any
	if err := dec.Decode(&c); err != nil || c == nil {
		return nil, invalid("claims are not a JSON object")
	}
	iss, _ := c["iss"].(string)
	if strings.TrimSuffix(iss, "/") != v.cfg.Issuer {
		return nil, invalid("issuer %q is not the configured one", iss)
	}
	if !audienceHas(c["aud"], v.cfg.Audience) {
		return nil, invalid("token is not for this resource (aud does not name %s)", v.cfg.Audience)
	}
	now := v.now()
	exp, ok := numericDate(c["exp"])
	if !ok {
		return nil, invalid("no exp claim")
	}
	if now.After(exp.Add(Leeway)) {
		return nil, invalid("token expired")
	}
	return principal(c, now, v.cfg)
}

// principal finishes the checks a JWT's claims and an introspection
// answer share (nbf, sub) and builds the caller's principal from them.
func principal(c map[string]any, now time.Time, cfg *config.OIDC) (*extension.Principal, error) {
	if c["nbf"] != nil {
		nbf, ok := numericDate(c["nbf"])
		if !ok {
			return nil, invalid("malformed nbf claim")
		}
		if nbf.After(now.Add(Leeway)) {
			return nil, invalid("token not valid yet")
		}
	}
	sub, _ := c["sub"].(string)
	if sub == "" {
		return nil, invalid("no sub claim")
	}
	return &extension.Principal{
		Subject: sub, Issuer: cfg.Issuer,
		Groups: stringList(c[cfg.GroupsClaim]),
		Scopes: scopes(c),
		Claims: c,
	}, nil
}

// Expiry returns the token's exp, or the zero time for a principal that
// has none (an API key).
func Expiry(p *extension.Principal) time.Time {
	if p == nil || p.Claims == nil {
		return time.Time{}
	}
	t, _ := numericDate(p.Claims["exp"])
	return t
}

func audienceHas(aud any, want string) bool {
	switch a := aud.(type) {
	case string:
		return a == want
	case []any:
		for _, x := range a {
			if s, ok := x.(string); ok && s == want {
				return true
			}
		}
	}
	return false
}

func numericDate(v any) (time.Time, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return time.Time{}, false
	}
	f, err := n.Float64()
	if err != nil || f < 0 || f > 1<<40 {
		return time.Time{}, false
	}
	return time.Unix(int64(f), 0), true
}

// scopes reads "scope" (RFC 9068: space-separated) or "scp" (a list, as
// some providers send).
func scopes(c map[string]any) []string {
	if s, ok := c["scope"].(string); ok {
		return strings.Fields(s)
	}
	return stringList(c["scp"])
}

// stringList reads a claim that is a string or a list of strings.
func stringList(v any) []string {
	switch x := v.(type) {
	case string:
		if x == "" {
			return nil
		}
		return []string{x}
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// key returns the verification key for kid, fetching the key set when
// there is none yet, when it is old, or when kid is unknown (the provider
// rotated its keys), no more often than minRefresh.
func (v *oidcVerifier) key(ctx context.Context, kid string) (verifyKey, error) {
	set := v.keys.Load()
	if set != nil && v.now().Sub(set.fetched) < maxKeyAge {
		if k, ok := set.find(kid); ok {
			return k, nil
		}
	}
	set, err := v.refresh(ctx, set)
	if set == nil {
		return verifyKey{}, fmt.Errorf("auth.oidc: keys of %s: %w", v.cfg.Issuer, err)
	}
	if k, ok := set.find(kid); ok {
		return k, nil
	}
	if kid == "" {
		return verifyKey{}, invalid("no kid, and the issuer has several keys")
	}
	return verifyKey{}, invalid("unknown key id %q", kid)
}

func (s *keySet) find(kid string) (verifyKey, bool) {
	if kid == "" {
		if s.only != nil {
			return *s.only, true
		}
		return verifyKey{}, false
	}
	k, ok := s.byKID[kid]
	return k, ok
}

// refresh fetches the key set unless another caller just did (it then
// returns that caller's set) or the last attempt was under minRefresh ago
// (it returns the current set). A failed fetch keeps the current set.
func (v *oidcVerifier) refresh(ctx context.Context, seen *keySet) (*keySet, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if cur := v.keys.Load(); cur != seen {
		return cur, nil
	}
	now := v.now()
	if !v.lastTry.IsZero() && now.Sub(v.lastTry) < minRefresh {
		return seen, errors.New("fetched less than 30 s ago")
	}
	v.lastTry = now
	set, err := v.fetch(ctx)
	if err != nil {
		v.log.Warn("fetching the OIDC provider's keys failed", "issuer", v.cfg.Issuer, "error", err)
		return seen, err
	}
	set.fetched = now
	v.keys.Store(set)
	v.log.Info("fetched the OIDC provider's keys", "issuer", v.cfg.Issuer, "keys", len(set.byKID))
	return set, nil
}

func (v *oidcVerifier) fetch(ctx context.Context) (*keySet, error) {
	if v.jwksURI == "" {
		var doc struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := v.getJSON(ctx, v.cfg.Issuer+"/.well-known/openid-configuration", &doc); err != nil {
			return nil, err
		}
		// OpenID Connect Discovery §4.3: the document must name the issuer
		// it was fetched for, or its keys are not that issuer's.
		if strings.TrimSuffix(doc.Issuer, "/") != v.cfg.Issuer {
			return nil, fmt.Errorf("discovery document names issuer %q, not %q", doc.Issuer, v.cfg.Issuer)
		}
		u, err := url.Parse(doc.JWKSURI)
		if err != nil || (u.Scheme != "https" && !(u.Scheme == "http" && strings.HasPrefix(v.cfg.Issuer, "http://"))) {
			return nil, fmt.Errorf("discovery document: jwks_uri %q is not an https URL", doc.JWKSURI)
		}
		v.jwksURI = doc.JWKSURI
	}
	var body json.RawMessage
	if err := v.getJSON(ctx, v.jwksURI, &body); err != nil {
		return nil, err
	}
	set, err := jwk.Parse(body)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", v.jwksURI, err)
	}
	ks := &keySet{byKID: map[string]verifyKey{}}
	var last verifyKey
	n := 0
	for i := range set.Len() {
		k, _ := set.Key(i)
		if use, ok := k.KeyUsage(); ok && use != "sig" {
			continue
		}
		var raw any
		if err := jwk.Export(k, &raw); err != nil {
			continue
		}
		if _, private := raw.(crypto.Signer); private {
			// A private key in a public key set is a provider bug; verify
			// with its public half only.
			pk, err := jwk.PublicRawKeyOf(raw)
			if err != nil {
				continue
			}
			raw = pk
		}
		vk := verifyKey{raw: raw}
		if a, ok := k.Algorithm(); ok {
			vk.alg = a.String()
		}
		if strings.HasPrefix(vk.alg, "HS") || k.KeyType().String() == "oct" {
			continue // a symmetric key never verifies an access token here
		}
		kid, _ := k.KeyID()
		if kid != "" {
			if _, dup := ks.byKID[kid]; !dup {
				ks.byKID[kid] = vk
			}
		}
		last = vk
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: no signature keys", v.jwksURI)
	}
	if n == 1 {
		ks.only = &last
	}
	return ks, nil
}

func (v *oidcVerifier) getJSON(ctx context.Context, u string, dst any) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes+1))
	if err != nil {
		return fmt.Errorf("GET %s: %v", u, err)
	}
	if len(data) > maxDocBytes {
		return fmt.Errorf("GET %s: answer larger than %d bytes", u, maxDocBytes)
	}
	if err := json.Unmarshal(data, dst); err != nil {
		return fmt.Errorf("GET %s: %v", u, err)
	}
	return nil
}
