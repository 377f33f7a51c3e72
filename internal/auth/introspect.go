package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
)

// introspectTTL bounds how long an introspected token is trusted without
// asking again: a token the provider revokes stops working within it.
const introspectTTL = time.Minute

// introspector checks opaque access tokens at the provider's token
// introspection endpoint (RFC 7662), authenticating as the configured
// client, and caches the answer briefly.
type introspector struct {
	cfg    *config.OIDC
	in     *config.Introspection
	client *http.Client
	now    func() time.Time
	cache  *tokenCache
}

func newIntrospector(cfg *config.OIDC, opts Options) *introspector {
	return &introspector{cfg: cfg, in: cfg.Introspection, client: opts.HTTPClient, now: opts.Now, cache: newTokenCache()}
}

func (v *introspector) verify(ctx context.Context, token string) (*extension.Principal, error) {
	if len(token) > maxTokenBytes {
		return nil, invalid("token longer than %d bytes", maxTokenBytes)
	}
	sum := sha256.Sum256([]byte(token))
	if p := v.cache.get(sum, v.now()); p != nil {
		return p, nil
	}
	c, err := v.ask(ctx, token)
	if err != nil {
		return nil, err
	}
	p, err := v.claims(c)
	if err != nil {
		return nil, err
	}
	v.cache.put(sum, p, v.now(), introspectTTL)
	return p, nil
}

// ask posts the token to the endpoint. An error that is not
// ErrInvalidToken means the gateway could not decide (503).
func (v *introspector) ask(ctx context.Context, token string) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.in.URL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	// RFC 6749 §2.3.1: the client id and secret are form-encoded before
	// they go into the Basic credentials.
	req.SetBasicAuth(url.QueryEscape(v.in.ClientID), url.QueryEscape(v.in.ClientSecret))
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("auth.oidc.introspection: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("auth.oidc.introspection: POST %s: %s", v.in.URL, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes+1))
	if err != nil || len(data) > maxDocBytes {
		return nil, fmt.Errorf("auth.oidc.introspection: POST %s: answer unreadable or larger than %d bytes", v.in.URL, maxDocBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var c map[string]any
	if err := dec.Decode(&c); err != nil || c == nil {
		return nil, fmt.Errorf("auth.oidc.introspection: POST %s: the answer is not a JSON object", v.in.URL)
	}
	return c, nil
}

// claims checks an introspection answer the way a JWT's claims are
// checked. iss and aud are optional in RFC 7662; when present they must
// name the configured issuer and this resource.
func (v *introspector) claims(c map[string]any) (*extension.Principal, error) {
	if active, _ := c["active"].(bool); !active {
		return nil, invalid("token is not active")
	}
	if iss, ok := c["iss"].(string); ok && strings.TrimSuffix(iss, "/") != v.cfg.Issuer {
		return nil, invalid("issuer %q is not the configured one", iss)
	}
	if aud, ok := c["aud"]; ok && !audienceHas(aud, v.cfg.Audience) {
		return nil, invalid("token is not for this resource (aud does not name %s)", v.cfg.Audience)
	}
	now := v.now()
	if c["exp"] != nil {
		exp, ok := numericDate(c["exp"])
		if !ok {
			return nil, invalid("malformed exp")
		}
		if now.After(exp.Add(Leeway)) {
			return nil, invalid("token expired")
		}
	}
	return principal(c, now, v.cfg)
}
