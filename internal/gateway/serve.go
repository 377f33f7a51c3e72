package gateway

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/auth"
)

// statelessVersion is the first protocol revision without sessions.
const statelessVersion = "2026-07-28"

// Timeouts of the HTTP server (HTTPServer). None of them bounds a
// response: a streamable HTTP response or GET stream may last as long as
// the session.
const (
	// readHeaderTimeout bounds reading a request's headers.
	readHeaderTimeout = 10 * time.Second
	// bodyReadTimeout bounds reading a request's body, from the end of its
	// headers (see bodyDeadline).
	bodyReadTimeout = 30 * time.Second
	// idleTimeout closes a keep-alive connection with no request.
	idleTimeout = 2 * time.Minute
	// smallWriteTimeout bounds writing the /status and /metrics answers.
	smallWriteTimeout = 30 * time.Second
)

// httpTimeouts are the HTTP server's timeouts; tests shorten them.
type httpTimeouts struct {
	header, body, idle, smallWrite time.Duration
}

var defaultHTTPTimeouts = httpTimeouts{header: readHeaderTimeout, body: bodyReadTimeout, idle: idleTimeout, smallWrite: smallWriteTimeout}

// Connect serves one client over an arbitrary transport (tests, embedding).
func (g *Gateway) Connect(ctx context.Context, t mcp.Transport) (*mcp.ServerSession, error) {
	return g.servers[scopeConnection].Connect(ctx, t, nil)
}

// HTTPServer returns an http.Server for HTTPHandler with timeouts against
// slow clients: headers must arrive within 10 s and a body within 30 s
// more, and an idle keep-alive connection is closed after 2 minutes. There
// is no overall read or write timeout, which would cut the long-lived
// streams of streamable HTTP (a GET stream, a long tool call's SSE
// answer); the body deadline is set per request instead. listen is the
// --listen address: a host name in it is served like http.allowed_hosts.
func (g *Gateway) HTTPServer(listen string) *http.Server {
	return g.httpServer(defaultHTTPTimeouts, listen)
}

func (g *Gateway) httpServer(t httpTimeouts, listen string) *http.Server {
	return &http.Server{
		Handler:           g.httpHandler(t, listen),
		ReadHeaderTimeout: t.header,
		IdleTimeout:       t.idle,
	}
}

// HTTPHandler serves MCP over streamable HTTP. Requests of the stateless
// 2026-07-28 revision (told by their Mcp-Protocol-Version header) go to a
// stateless server whose gate works with signed discovery tokens; all
// others get stateful sessions (Mcp-Session-Id) with a gate per session,
// capped and expired when idle (http.max_sessions,
// http.session_idle_timeout). On every path, a request whose Host or
// Origin names a host the gateway does not serve is refused (DNS
// rebinding, see hostGuard), as are cross-origin browser requests to /mcp.
// GET /status reports the gateway's upstreams as JSON (see Status).
// With "auth" configured every path needs a bearer token (see
// internal/auth), /status and /metrics one with the "metrics" scope or
// group, and the protected resource metadata (RFC 9728) is served at
// /.well-known/oauth-protected-resource.
func (g *Gateway) HTTPHandler() http.Handler {
	return g.httpHandler(defaultHTTPTimeouts, "")
}

func (g *Gateway) httpHandler(t httpTimeouts, listen string) http.Handler {
	// The SDK's own rebinding check (loopback listeners only, case
	// sensitive) is replaced by hostGuard, which runs on every listener.
	// Idle sessions are closed by the session limiter, which sees the calls
	// the relay (httpRelay) answers too.
	stateful := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.servers[scopeConnection] },
		&mcp.StreamableHTTPOptions{Logger: sdkLogger(g.log), DisableLocalhostProtection: true})
	stateless := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.servers[scopeStateless] },
		&mcp.StreamableHTTPOptions{Logger: sdkLogger(g.log), Stateless: true, JSONResponse: true, PropagateRequestCancellation: true, DisableLocalhostProtection: true})
	sessions := newSessionLimiter(g.servers[scopeConnection], g.cfg.HTTP.SessionLimit(), g.cfg.HTTP.SessionIdle(), g.metrics, g.log)
	g.httpSessions.Store(sessions)
	statefulLimited := sessions.handler(g.httpRelay(sessions, stateful))
	route := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("Mcp-Protocol-Version"); v >= statelessVersion {
			stateless.ServeHTTP(w, r)
			return
		}
		statefulLimited.ServeHTTP(w, r)
	})
	small := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(t.smallWrite))
			h.ServeHTTP(w, r)
		})
	}
	mcpHandler, status, metrics := http.Handler(route), http.Handler(http.HandlerFunc(g.statusHandler)), g.metrics.handler()
	mux := http.NewServeMux()
	if a := g.authn; a != nil {
		// Every path but the public metadata needs a token. BindSessions
		// lets the SDK tie each stateful session to the principal that
		// opened it.
		mcpHandler = a.Require(auth.Requirement{Scopes: g.cfg.Auth.RequiredScopes()}, auth.BindSessions(route))
		ops := auth.Requirement{AnyOf: auth.MetricsScope}
		status, metrics = a.Require(ops, status), a.Require(ops, metrics)
		if md := a.MetadataHandler(); md != nil {
			mux.Handle(auth.MetadataPath, md)
			mux.Handle(auth.MetadataPath+"/", md)
		}
		mux.Handle("/", a.Require(auth.Requirement{}, http.NotFoundHandler()))
	}
	mux.Handle("/mcp", http.NewCrossOriginProtection().Handler(mcpHandler))
	if g.console != nil {
		mux.Handle(ConsolePath, g.consoleHandler())
		mux.Handle(strings.TrimSuffix(ConsolePath, "/"), http.RedirectHandler(ConsolePath, http.StatusMovedPermanently))
	}
	mux.Handle("/status", small(status))
	mux.Handle("/metrics", small(metrics))
	allowed := g.cfg.HTTP.AllowedHosts
	if h, _, err := net.SplitHostPort(listen); err == nil && h != "" {
		allowed = append(slices.Clip(allowed), h)
	}
	return bodyDeadline(t.body, newHostGuard(allowed).handler(mux))
}

// AuthEnabled reports whether the HTTP frontend authenticates callers.
func (g *Gateway) AuthEnabled() bool { return g.authn != nil }

// HostGuard refuses, as the MCP listener does, a request whose Host is
// neither an address nor a name that http.allowed_hosts or the listen
// address allows (DNS rebinding); for the other listeners a gateway serves
// (the LLM proxy).
func (g *Gateway) HostGuard(listen string, h http.Handler) http.Handler {
	allowed := g.cfg.HTTP.AllowedHosts
	if host, _, err := net.SplitHostPort(listen); err == nil && host != "" {
		allowed = append(slices.Clip(allowed), host)
	}
	return newHostGuard(allowed).handler(h)
}

// bodyDeadline gives a request with a body d to send it: a client that
// trickles its body (slowloris) is cut off. The deadline is lifted once
// the body has been read, so the connection's read deadline does not
// cancel a long answer streamed afterwards (net/http watches the
// connection for a disconnect while the handler runs).
func bodyDeadline(d time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err == nil {
			r.Body = &liftOnEOF{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		}
		h.ServeHTTP(w, r)
	})
}

// liftOnEOF calls lift once, when the body has been read to its end. After
// an error (the deadline passed) the deadline stays, so net/http's discard
// of the unread rest cannot hang either.
type liftOnEOF struct {
	io.ReadCloser
	lift   func()
	lifted bool
}

func (l *liftOnEOF) Read(p []byte) (int, error) {
	n, err := l.ReadCloser.Read(p)
	if err == io.EOF && !l.lifted {
		l.lifted = true
		l.lift()
	}
	return n, err
}
