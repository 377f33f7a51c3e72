package config

import (
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Auth is the "auth" object: who may use the streamable HTTP frontend
// (serve --listen). stdio is the local user and is not authenticated.
// When set, every HTTP path needs a bearer token: an OIDC access token,
// an API key, or either when both are configured.
type Auth struct {
	// APIKeys are static keys sent as "Authorization: Bearer KEY"; only
	// their SHA-256 is kept.
	APIKeys []APIKey `json:"api_keys,omitempty"`
	// APIKeysFile names a JSON file holding the same list as APIKeys
	// (relative to the config's folder), so the config can be shared
	// without the hashes. Both may be set; the lists are joined.
	APIKeysFile string `json:"api_keys_file,omitempty"`
	// OIDC accepts JWT access tokens from one OpenID provider.
	OIDC *OIDC `json:"oidc,omitempty"`
}

// APIKey is one entry of auth.api_keys.
type APIKey struct {
	// Principal names the caller in decisions and the audit log.
	Principal string   `json:"principal"`
	Groups    []string `json:"groups,omitempty"`
	// SHA256 is the hex SHA-256 of the key (sha256sum of the key, without
	// a newline).
	SHA256 string `json:"sha256"`
	// Scopes the key grants, like a token's (for example "metrics").
	Scopes []string `json:"scopes,omitempty"`
}

// OIDC is auth.oidc: JWT access tokens validated against the issuer's
// published keys.
type OIDC struct {
	// Issuer is the provider's issuer URL; its keys are found through
	// ISSUER/.well-known/openid-configuration. https, or http to a
	// loopback address (tests, a provider on the same host).
	Issuer string `json:"issuer"`
	// Audience is this gateway's resource identifier (RFC 8707), usually
	// its public MCP URL (https://gateway.example/mcp). A token whose
	// "aud" does not name it was issued for another resource and is
	// refused. It is also the "resource" of the protected resource
	// metadata (RFC 9728) served at /.well-known/oauth-protected-resource.
	Audience string `json:"audience"`
	// RequiredScopes must all be granted by a token to use /mcp.
	RequiredScopes []string `json:"required_scopes,omitempty"`
	// GroupsClaim is the claim holding the caller's groups or roles (a
	// string or a list of strings). Default "groups".
	GroupsClaim string `json:"groups_claim,omitempty"`
	// Algorithms are the JWS algorithms accepted. Default: RS256, RS384,
	// RS512, PS256, PS384, PS512, ES256, ES384, ES512 and EdDSA. "none"
	// and the HMAC algorithms (HS*) are never accepted: a resource server
	// holds no shared secret, and HS with a public key is a known forgery.
	Algorithms []string `json:"algorithms,omitempty"`
	// Introspection, when set, checks tokens that are not JWTs (opaque
	// access tokens) at the provider's RFC 7662 endpoint.
	Introspection *Introspection `json:"introspection,omitempty"`
}

// Introspection is auth.oidc.introspection: the provider's token
// introspection endpoint and the client toolgate authenticates as there.
type Introspection struct {
	URL      string `json:"url"`
	ClientID string `json:"client_id"`
	// ClientSecret: "$VAR" reads it from the environment or the config's
	// .env.
	ClientSecret string `json:"client_secret"`
}

// DefaultGroupsClaim is the claim read for groups when none is set.
const DefaultGroupsClaim = "groups"

// DefaultAlgorithms are the JWS algorithms accepted by default.
var DefaultAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Enabled reports whether the HTTP frontend authenticates callers.
func (a *Auth) Enabled() bool {
	return a != nil && (len(a.APIKeys) > 0 || a.OIDC != nil)
}

// RequiredScopes are the scopes an OIDC token needs for /mcp.
func (a *Auth) RequiredScopes() []string {
	if a == nil || a.OIDC == nil {
		return nil
	}
	return a.OIDC.RequiredScopes
}

// validate checks the object, reads api_keys_file (relative to dir) and
// normalises hashes to lower case.
func (a *Auth) validate(dir string, lookup func(string) (string, bool)) error {
	if a.APIKeysFile != "" {
		p := a.APIKeysFile
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("auth.api_keys_file: %v", err)
		}
		var keys []APIKey
		if err := strictDecode(data, &keys); err != nil {
			return fmt.Errorf("auth.api_keys_file %s: %v", p, err)
		}
		if len(keys) == 0 {
			return fmt.Errorf("auth.api_keys_file %s: no keys", p)
		}
		a.APIKeysFile = p
		a.APIKeys = append(a.APIKeys, keys...)
	}
	seen := map[string]string{}
	for i := range a.APIKeys {
		k := &a.APIKeys[i]
		where := fmt.Sprintf("auth.api_keys[%d]", i)
		if strings.TrimSpace(k.Principal) == "" {
			return fmt.Errorf("%s: missing \"principal\"", where)
		}
		where = fmt.Sprintf("auth.api_keys[%d] (%s)", i, k.Principal)
		h := strings.ToLower(strings.TrimSpace(k.SHA256))
		if b, err := hex.DecodeString(h); err != nil || len(b) != 32 {
			return fmt.Errorf("%s: \"sha256\" must be the 64 hex digits of the key's SHA-256 (echo -n KEY | sha256sum), not the key itself", where)
		}
		if other, dup := seen[h]; dup {
			return fmt.Errorf("%s: same key as principal %q", where, other)
		}
		seen[h] = k.Principal
		k.SHA256 = h
		for j, g := range k.Groups {
			if strings.TrimSpace(g) == "" {
				return fmt.Errorf("%s: groups[%d] is empty", where, j)
			}
		}
	}
	if o := a.OIDC; o != nil {
		if err := o.validate(lookup); err != nil {
			return err
		}
	}
	if !a.Enabled() {
		return fmt.Errorf(`auth: set "oidc", "api_keys" or "api_keys_file" (an empty "auth" would leave the frontend open)`)
	}
	return nil
}

func (o *OIDC) validate(lookup func(string) (string, bool)) error {
	if o.Issuer == "" {
		return fmt.Errorf(`auth.oidc: missing "issuer"`)
	}
	if err := secureURL(o.Issuer); err != nil {
		return fmt.Errorf("auth.oidc.issuer: %v", err)
	}
	o.Issuer = strings.TrimSuffix(o.Issuer, "/")
	if o.Audience == "" {
		return fmt.Errorf(`auth.oidc: missing "audience" (this gateway's resource identifier, e.g. https://gateway.example/mcp)`)
	}
	if u, err := url.Parse(o.Audience); err != nil || u.Scheme == "" || u.Host == "" || u.Fragment != "" {
		return fmt.Errorf("auth.oidc.audience: %q is not an absolute URL without a fragment (RFC 8707)", o.Audience)
	}
	if o.GroupsClaim == "" {
		o.GroupsClaim = DefaultGroupsClaim
	}
	if len(o.Algorithms) == 0 {
		o.Algorithms = DefaultAlgorithms
	}
	for i, alg := range o.Algorithms {
		ok := false
		for _, d := range DefaultAlgorithms {
			ok = ok || d == alg
		}
		if !ok {
			return fmt.Errorf("auth.oidc.algorithms[%d]: %q is not accepted (want some of %s; never none or HS*)", i, alg, strings.Join(DefaultAlgorithms, ", "))
		}
	}
	for i, s := range o.RequiredScopes {
		if s == "" || strings.ContainsAny(s, " \"\\") {
			return fmt.Errorf("auth.oidc.required_scopes[%d]: %q is not a scope", i, s)
		}
	}
	if in := o.Introspection; in != nil {
		if err := secureURL(in.URL); err != nil {
			return fmt.Errorf("auth.oidc.introspection.url: %v", err)
		}
		if in.ClientID == "" || in.ClientSecret == "" {
			return fmt.Errorf(`auth.oidc.introspection: "client_id" and "client_secret" are required (the client toolgate authenticates as at the endpoint)`)
		}
		secret, err := Expand(in.ClientSecret, lookup)
		if err != nil {
			return fmt.Errorf("auth.oidc.introspection.client_secret: %v", err)
		}
		in.ClientSecret = secret
	}
	return nil
}

// secureURL accepts an https URL, or http to a loopback address.
func secureURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		h := u.Hostname()
		if ip := net.ParseIP(h); h == "localhost" || ip != nil && ip.IsLoopback() {
			return nil
		}
	}
	return fmt.Errorf("%q: want https (http only to a loopback address)", raw)
}
