package extension

import "context"

// Principal is who is calling, as established by the HTTP frontend's
// authentication (an OIDC access token or an API key). Over stdio there
// is no Principal: the local user is trusted.
type Principal struct {
	// Subject is the token's "sub" claim, or the name of an API key.
	Subject string
	// Issuer is the token's "iss" claim; "api_key" for an API key.
	Issuer string
	// Groups come from the configured groups claim, or an API key's groups.
	Groups []string
	// Scopes are the scopes the token grants (empty for an API key).
	Scopes []string
	// Claims are the token's verified claims, for policies; nil for an
	// API key. Filters must not modify them.
	Claims map[string]any
}

// ID names the principal in requests, events and the audit log: the
// subject alone for an API key, "issuer|subject" for a token, so that
// two issuers' subjects never collide.
func (p *Principal) ID() string {
	if p == nil {
		return ""
	}
	if p.Issuer == "" || p.Issuer == APIKeyIssuer {
		return p.Subject
	}
	return p.Issuer + "|" + p.Subject
}

// InGroup reports whether the principal is in group g.
func (p *Principal) InGroup(g string) bool {
	if p == nil {
		return false
	}
	for _, have := range p.Groups {
		if have == g {
			return true
		}
	}
	return false
}

// HasScope reports whether the principal's token grants scope s.
func (p *Principal) HasScope(s string) bool {
	if p == nil {
		return false
	}
	for _, have := range p.Scopes {
		if have == s {
			return true
		}
	}
	return false
}

// APIKeyIssuer is the Issuer of a principal authenticated by an API key.
const APIKeyIssuer = "api_key"

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal in ctx, or nil when the request was
// not authenticated (stdio, or an HTTP frontend without auth).
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}
