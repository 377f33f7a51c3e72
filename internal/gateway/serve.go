package gateway

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// statelessVersion is the first protocol revision without sessions.
const statelessVersion = "2026-07-28"

// ServeStdio serves one client over stdin/stdout until it disconnects or
// ctx ends.
func (g *Gateway) ServeStdio(ctx context.Context) error {
	return g.servers[scopeConnection].Run(ctx, &mcp.StdioTransport{})
}

// Connect serves one client over an arbitrary transport (tests, embedding).
func (g *Gateway) Connect(ctx context.Context, t mcp.Transport) (*mcp.ServerSession, error) {
	return g.servers[scopeConnection].Connect(ctx, t, nil)
}

// HTTPHandler serves MCP over streamable HTTP. Requests of the stateless
// 2026-07-28 revision (told by their Mcp-Protocol-Version header) go to a
// stateless server whose gate works with signed discovery tokens; all
// others get stateful sessions (Mcp-Session-Id) with a gate per session.
// Requests to a loopback listener with a non-loopback Host are refused
// (DNS rebinding), as are cross-origin browser requests. GET /status
// reports the gateway's upstreams as JSON (see Status).
func (g *Gateway) HTTPHandler() http.Handler {
	stateful := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.servers[scopeConnection] },
		&mcp.StreamableHTTPOptions{Logger: sdkLogger(g.log), SessionTimeout: 30 * time.Minute})
	stateless := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.servers[scopeStateless] },
		&mcp.StreamableHTTPOptions{Logger: sdkLogger(g.log), Stateless: true, JSONResponse: true, PropagateRequestCancellation: true})
	route := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("Mcp-Protocol-Version"); v >= statelessVersion {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", http.NewCrossOriginProtection().Handler(route))
	mux.HandleFunc("/status", g.statusHandler)
	mux.Handle("/metrics", loopbackHostOnly(g.metrics.handler()))
	return mux
}

// LoopbackHostOnly is loopbackHostOnly for the other listeners a gateway
// serves (the LLM proxy).
func LoopbackHostOnly(h http.Handler) http.Handler { return loopbackHostOnly(h) }

// loopbackHostOnly refuses, on a loopback listener, a request whose Host is
// not loopback (DNS rebinding), like /mcp and /status.
func loopbackHostOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && loopback(la.String()) && !loopback(r.Host) {
			http.Error(w, "forbidden: invalid Host header", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
