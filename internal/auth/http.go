package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolgate/toolgate/extension"
)

// MetadataPath is where the protected resource metadata (RFC 9728) is
// served; the path of the resource is appended to it as well (§3.1:
// https://gw/mcp has https://gw/.well-known/oauth-protected-resource/mcp).
const MetadataPath = "/.well-known/oauth-protected-resource"

// Requirement says what a path needs beyond a valid token.
type Requirement struct {
	// Scopes must all be granted by an OIDC token (API keys are granted
	// what their entry lists and are checked the same way only when
	// AnyOf is set).
	Scopes []string
	// AnyOf, when set, is satisfied by a scope or a group of that name
	// (a principal authenticated by any means); Scopes is then ignored.
	AnyOf string
}

// allows reports whether p meets r, and the scope to ask for if not.
func (r Requirement) allows(p *extension.Principal) (bool, []string) {
	if r.AnyOf != "" {
		return p.HasScope(r.AnyOf) || p.InGroup(r.AnyOf), []string{r.AnyOf}
	}
	if p.Issuer == extension.APIKeyIssuer {
		return true, nil
	}
	for _, s := range r.Scopes {
		if !p.HasScope(s) {
			return false, r.Scopes
		}
	}
	return true, nil
}

// ResourceMetadataURL is the absolute URL of the protected resource
// metadata, derived from the configured audience (the resource's public
// URL), or "" when OIDC is not configured (API keys have no
// authorization server to point a client at).
func (a *Authenticator) ResourceMetadataURL() string {
	if a.cfg.OIDC == nil {
		return ""
	}
	u, err := url.Parse(a.cfg.OIDC.Audience)
	if err != nil {
		return ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: MetadataPath + strings.TrimSuffix(u.Path, "/")}).String()
}

// MetadataHandler serves the protected resource metadata (RFC 9728),
// naming the OIDC issuer as the authorization server, or nil when OIDC is
// not configured. It is public: clients read it before they have a token.
func (a *Authenticator) MetadataHandler() http.Handler {
	o := a.cfg.OIDC
	if o == nil {
		return nil
	}
	return sdkauth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               o.Audience,
		AuthorizationServers:   []string{o.Issuer},
		ScopesSupported:        scopesSupported(o.RequiredScopes),
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "toolgate",
	})
}

func scopesSupported(required []string) []string {
	s := slices.Clone(required)
	if !slices.Contains(s, MetricsScope) {
		s = append(s, MetricsScope)
	}
	return s
}

// Require wraps next so that it is reached only with a valid bearer
// token meeting req; the principal is then in the request's context
// (extension.PrincipalFrom). Refusals follow RFC 6750 §3: 401 with a
// "WWW-Authenticate: Bearer" challenge (naming the resource metadata, so
// an MCP client can find where to log in), 403 insufficient_scope for a
// valid token lacking a scope, 503 when the provider's keys cannot be
// fetched.
func (a *Authenticator) Require(req Requirement, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r)
		if !ok {
			a.challenge(w, http.StatusUnauthorized, "", "", nil, "missing bearer token")
			return
		}
		p, err := a.Authenticate(r.Context(), token)
		if err != nil {
			if errors.Is(err, ErrInvalidToken) {
				a.log.Debug("refused a token", "path", r.URL.Path, "reason", err.Error())
				a.challenge(w, http.StatusUnauthorized, "invalid_token", err.Error(), nil, err.Error())
				return
			}
			a.log.Error("cannot check a token", "error", err)
			http.Error(w, "cannot check the token now: the identity provider's keys are unavailable", http.StatusServiceUnavailable)
			return
		}
		if ok, need := req.allows(p); !ok {
			msg := fmt.Sprintf("insufficient scope: need %s", strings.Join(need, " "))
			a.challenge(w, http.StatusForbidden, "insufficient_scope", msg, need, msg)
			return
		}
		next.ServeHTTP(w, r.WithContext(extension.WithPrincipal(r.Context(), p)))
	})
}

// challenge writes a refusal with its WWW-Authenticate header.
func (a *Authenticator) challenge(w http.ResponseWriter, status int, code, desc string, scopes []string, body string) {
	var params []string
	if a.cfg.OIDC == nil {
		params = append(params, `realm="toolgate"`)
	}
	if code != "" {
		params = append(params, fmt.Sprintf("error=%q", code))
		params = append(params, fmt.Sprintf("error_description=%q", quoteSafe(desc)))
	}
	if len(scopes) > 0 {
		params = append(params, fmt.Sprintf("scope=%q", strings.Join(scopes, " ")))
	}
	if u := a.ResourceMetadataURL(); u != "" {
		params = append(params, fmt.Sprintf("resource_metadata=%q", u))
	}
	w.Header().Set("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
	http.Error(w, body, status)
}

// quoteSafe keeps a description inside RFC 6750's allowed characters
// (%x20-21 / %x23-5B / %x5D-7E): no quote, backslash or control byte.
func quoteSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return '\''
		}
		return r
	}, s)
}

func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// principalExtra is the TokenInfo.Extra key holding the *Principal, so
// that MCP handlers, which see the SDK's TokenInfo rather than the HTTP
// request's context, can find it.
const principalExtra = "toolgate.principal"

// PrincipalOf returns the principal an MCP request was authenticated as
// (see BindSessions), or nil.
func PrincipalOf(ti *sdkauth.TokenInfo) *extension.Principal {
	if ti == nil {
		return nil
	}
	p, _ := ti.Extra[principalExtra].(*extension.Principal)
	return p
}

// BindSessions wraps a streamable HTTP handler that Require has already
// guarded so that the SDK binds each stateful session to the principal
// that opened it: a request carrying another principal's valid token and
// that session's Mcp-Session-Id is refused by the SDK (it compares
// TokenInfo.UserID). It does no verification of its own.
func BindSessions(next http.Handler) http.Handler {
	verify := func(ctx context.Context, _ string, _ *http.Request) (*sdkauth.TokenInfo, error) {
		p := extension.PrincipalFrom(ctx)
		if p == nil {
			return nil, sdkauth.ErrInvalidToken
		}
		return &sdkauth.TokenInfo{UserID: p.ID(), Scopes: p.Scopes, Expiration: Expiry(p), Extra: map[string]any{principalExtra: p}}, nil
	}
	return sdkauth.RequireBearerToken(verify, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true, ClockSkew: Leeway})(next)
}
