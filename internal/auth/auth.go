// Package auth authenticates the callers of toolgate's streamable HTTP
// frontend: it makes toolgate an OAuth 2.1 resource server in the sense of
// the MCP authorization spec. A caller sends "Authorization: Bearer T"
// where T is a JWT access token from the configured OpenID provider
// (validated against the provider's published keys: signature, issuer,
// audience per RFC 8707, expiry, scopes) or one of the configured API
// keys. The result is an extension.Principal in the request context.
//
// The HTTP side (challenges, protected resource metadata per RFC 9728)
// is in http.go; the token checks in oidc.go; API keys in apikeys.go.
package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
)

// Leeway is the clock skew allowed on a token's exp and nbf.
const Leeway = 30 * time.Second

// MetricsScope is the scope, or group, that opens /status and /metrics
// when auth is on.
const MetricsScope = "metrics"

// ErrInvalidToken is wrapped by every refusal of a presented token
// (answered 401 invalid_token). Its message is safe to send to the caller:
// it says what is wrong with the token, never what the gateway expected
// in secret.
var ErrInvalidToken = errors.New("invalid token")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidToken, fmt.Sprintf(format, args...))
}

// Options are the Authenticator's dependencies; zero values are fine.
type Options struct {
	// HTTPClient fetches the provider's discovery document and keys.
	// Default: a client with a 10 s timeout.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Now is the clock; tests move it.
	Now func() time.Time
}

// Authenticator turns a bearer token into a Principal. It is safe for
// concurrent use.
type Authenticator struct {
	cfg  *config.Auth
	keys *apiKeys
	oidc *oidcVerifier
	// introspect checks opaque tokens; nil unless configured.
	introspect *introspector
	log        *slog.Logger
}

// New builds an Authenticator for cfg (which config.Parse validated). It
// makes no network request: the provider's keys are fetched on the first
// token.
func New(cfg *config.Auth, opts Options) (*Authenticator, error) {
	if !cfg.Enabled() {
		return nil, errors.New("auth: nothing configured")
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	a := &Authenticator{cfg: cfg, log: opts.Logger}
	if len(cfg.APIKeys) > 0 {
		k, err := newAPIKeys(cfg.APIKeys)
		if err != nil {
			return nil, err
		}
		a.keys = k
	}
	if cfg.OIDC != nil {
		v, err := newOIDCVerifier(cfg.OIDC, opts)
		if err != nil {
			return nil, err
		}
		a.oidc = v
		if cfg.OIDC.Introspection != nil {
			a.introspect = newIntrospector(cfg.OIDC, opts)
		}
	}
	return a, nil
}

// Authenticate returns the principal token stands for. A refused token
// gives an error wrapping ErrInvalidToken; any other error means the
// gateway could not decide (the provider's keys could not be fetched).
func (a *Authenticator) Authenticate(ctx context.Context, token string) (*extension.Principal, error) {
	if token == "" {
		return nil, invalid("empty token")
	}
	// An API key is tried first: it is a hash lookup, and a JWT is never
	// a configured key.
	if a.keys != nil {
		if p := a.keys.lookup(token); p != nil {
			return p, nil
		}
	}
	if a.oidc != nil && looksLikeJWT(token) {
		return a.oidc.verify(ctx, token)
	}
	if a.introspect != nil {
		return a.introspect.verify(ctx, token)
	}
	return nil, invalid("unknown token")
}
