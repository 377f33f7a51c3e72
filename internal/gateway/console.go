package gateway

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/pipeline"
	"github.com/toolgate/toolgate/internal/search"
	"github.com/toolgate/toolgate/internal/secrets"
)

// The hooks the web console (internal/console) is built on: it is mounted
// at ConsolePath, sees every recorded event, and reads what it shows
// through the accessors below. The console's own logic stays in its
// package.

// ConsolePath is where the HTTP frontend serves the console.
const ConsolePath = "/ui/"

// ConsoleScope is the scope or group a caller needs for the console when
// "auth" is configured. Without auth the console answers loopback
// callers only.
const ConsoleScope = "operator"

// ConsoleCookie carries an operator's bearer token for a browser, which
// cannot add an Authorization header to a page load; the console's login
// page sets it.
const ConsoleCookie = "toolgate_console"

// Observed is a recorded event as an observer sees it: the audit record's
// fields (not yet redacted: an observer that shows them must redact) and,
// for a call, the filter steps run so far, and the call's trace, which
// goes on to collect the steps run after the event (response filters).
type Observed struct {
	Time      time.Time
	Type      string
	Session   string
	Principal string
	Server    string
	Tool      string
	Action    string
	Reason    string
	Fields    map[string]any
	Steps     []pipeline.Step
	Trace     *pipeline.Trace
}

type observer = func(Observed)

// Observe makes fn receive every event the gateway records, on the
// recording goroutine: fn must not block, nor modify Fields. One observer;
// a later call replaces it, and nil removes it.
func (g *Gateway) Observe(fn func(Observed)) { g.observer.Store(&fn) }

func (g *Gateway) observe(ctx context.Context, e extension.Event) {
	p := g.observer.Load()
	if p == nil || *p == nil {
		return
	}
	(*p)(Observed{
		Time: time.Now().UTC(), Type: e.Type, Session: e.Session, Principal: extension.PrincipalFrom(ctx).ID(),
		Server: e.Server, Tool: e.Tool, Action: e.Action, Reason: e.Reason, Fields: e.Fields,
		Steps: pipeline.TraceFrom(ctx).Steps(), Trace: pipeline.TraceFrom(ctx),
	})
}

// Record appends an event to the audit log (and the event stream), with
// the principal in ctx: the console records what an operator did.
func (g *Gateway) Record(ctx context.Context, e extension.Event) error { return g.record(ctx, e) }

// Redact masks known secrets and URL credentials in s.
func (g *Gateway) Redact(s string) string { return secrets.StripURLs(g.redactString(s)) }

// RedactValue masks known secrets in the strings of a JSON-like value,
// returning a copy when something changed.
func (g *Gateway) RedactValue(v any) any {
	if g.redact == nil {
		return v
	}
	return g.redact.Value(v)
}

// Extensions are the provisioned extensions, in registration order.
func (g *Gateway) Extensions() []extension.Extension { return g.pipe.Extensions() }

// SearchParts breaks a query's scores down by index part (lexical, dense),
// or returns nil when the index cannot.
func (g *Gateway) SearchParts(ctx context.Context, query string) (map[string]search.Parts, error) {
	if e, ok := g.idx.(search.Explainer); ok {
		return e.Explain(ctx, query)
	}
	return nil, nil
}

// SimilarityThreshold is the score below which search drops a tool.
func (g *Gateway) SimilarityThreshold() float64 { return g.cfg.Filters.SimilarityThreshold }

// MountConsole serves h at ConsolePath on the HTTP frontend, behind the
// same host guard and authentication as every path: with "auth", a token
// with the ConsoleScope scope or group (from the Authorization header or
// the ConsoleCookie); without, loopback callers only. Call it before
// HTTPServer or HTTPHandler.
func (g *Gateway) MountConsole(h http.Handler) { g.console = h }

// consoleHandler wraps the mounted console with its access check.
func (g *Gateway) consoleHandler() http.Handler {
	h := g.console
	if g.authn == nil {
		return loopbackOnly(h)
	}
	protected := g.authn.Require(auth.Requirement{AnyOf: ConsoleScope}, h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The login page takes a token; it shows nothing else.
		if r.URL.Path == ConsolePath+"login" {
			h.ServeHTTP(w, r)
			return
		}
		if r.Header.Get("Authorization") == "" {
			c, err := r.Cookie(ConsoleCookie)
			if err != nil || c.Value == "" {
				// A person opening a page is sent to sign in; a script
				// gets the 401 challenge.
				if r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/html") {
					http.Redirect(w, r, ConsolePath+"login", http.StatusSeeOther)
					return
				}
			} else {
				r = r.Clone(r.Context())
				r.Header.Set("Authorization", "Bearer "+c.Value)
			}
		}
		protected.ServeHTTP(w, r)
	})
}

// loopbackOnly refuses callers not on a loopback address: without
// authentication the console is for the operator on this machine, even
// when --insecure-no-auth serves MCP on the network.
func loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		ip, perr := netip.ParseAddr(host)
		if err != nil || perr != nil || !ip.Unmap().IsLoopback() {
			http.Error(w, "forbidden: the console answers loopback callers only until \"auth\" is configured", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
