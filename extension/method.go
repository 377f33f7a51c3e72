package extension

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MethodProvider serves new JSON-RPC request methods beside MCP's own
// (SEP-2133), e.g. "com.example/stats". Build each with NewMethod.
type MethodProvider interface {
	Methods() []Method
}

// CapabilityProvider advertises settings at capabilities.extensions[ID] of
// the gateway's initialize result (SEP-2133). A nil map advertises the
// extension with no settings. The map must not be modified afterwards.
type CapabilityProvider interface {
	Capabilities() map[string]any
}

// Method is a request method an extension serves. Build it with NewMethod.
type Method struct {
	// Name is the JSON-RPC method name.
	Name string
	// ProtocolVersions, when set, restricts the method to those MCP
	// protocol versions: a request at any other version is answered
	// "method not found", as for a method the spec does not define at that
	// version. Empty admits every version.
	ProtocolVersions []string

	add func(s *mcp.Server) error
}

// paramsPtr is a pointer to a params struct that embeds mcp.ParamsBase.
type paramsPtr[T any] interface {
	*T
	mcp.Params
}

// NewMethod is a request method whose params decode into P (a pointer to
// a struct embedding mcp.ParamsBase) and whose result R embeds
// mcp.ResultBase. An error returned by handler that is a *jsonrpc.Error is
// the JSON-RPC error of the answer; a *Denial is answered with its
// RPCError; any other error is an internal error.
func NewMethod[P paramsPtr[T], R mcp.Result, T any](name string, versions []string, handler func(ctx context.Context, params P) (R, error)) Method {
	m := Method{Name: name, ProtocolVersions: versions}
	m.add = func(s *mcp.Server) error {
		return mcp.AddReceivingCustomMethod(s, name, func(ctx context.Context, _ *mcp.ServerSession, p P) (R, error) {
			r, err := handler(ctx, p)
			if d, ok := AsDenial(err); ok {
				return r, d.RPCError()
			}
			return r, err
		})
	}
	return m
}

// specMethods are the request and notification methods MCP defines, in
// either direction, at any version. An extension may not serve one: the
// gateway's handler (or the client's) owns it.
var specMethods = []string{
	"initialize", "ping", "server/discover", "subscriptions/listen",
	"tools/list", "tools/call",
	"resources/list", "resources/templates/list", "resources/read", "resources/subscribe", "resources/unsubscribe",
	"prompts/list", "prompts/get",
	"completion/complete", "logging/setLevel",
	"sampling/createMessage", "roots/list", "elicitation/create",
	"tasks/get", "tasks/list", "tasks/result", "tasks/cancel",
}

// CheckMethod reports why m cannot be served: a missing name or handler, a
// name MCP itself defines, or a name outside the extension's namespace
// convention (it must contain a "/").
func CheckMethod(m Method) error {
	switch {
	case m.Name == "":
		return errors.New("a method has no name")
	case m.add == nil:
		return fmt.Errorf("method %q was not built with extension.NewMethod", m.Name)
	case slices.Contains(specMethods, m.Name) || strings.HasPrefix(m.Name, "notifications/"):
		return fmt.Errorf("method %q is defined by MCP; an extension may only add new methods", m.Name)
	case strings.HasPrefix(m.Name, "rpc.") || !strings.Contains(m.Name, "/"):
		return fmt.Errorf("method %q: name it vendor.prefix/method or namespace/method (e.g. com.example/stats)", m.Name)
	}
	return nil
}

// AddMethods serves every method of the extensions on s, with their
// protocol-version gates. It is the gateway's part: extension authors do
// not call it.
func AddMethods(s *mcp.Server, exts []Extension) error {
	gates := map[string][]string{}
	for _, e := range exts {
		mp, ok := e.(MethodProvider)
		if !ok {
			continue
		}
		for _, m := range mp.Methods() {
			if err := CheckMethod(m); err != nil {
				return fmt.Errorf("extension %s: %w", e.ID(), err)
			}
			if _, dup := gates[m.Name]; dup {
				return fmt.Errorf("extension %s: method %q is already served", e.ID(), m.Name)
			}
			if err := m.add(s); err != nil {
				return fmt.Errorf("extension %s: %w", e.ID(), err)
			}
			gates[m.Name] = m.ProtocolVersions
		}
	}
	if len(gates) == 0 {
		return nil
	}
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			versions, ours := gates[method]
			if ours && len(versions) > 0 {
				v := ""
				if pv, ok := req.(interface{ ProtocolVersion() string }); ok {
					v = pv.ProtocolVersion()
				}
				if !slices.Contains(versions, v) {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method %q is not available at protocol version %q", method, v)}
				}
			}
			return next(ctx, method, req)
		}
	})
	return nil
}

// AddCapabilities advertises every CapabilityProvider's settings at
// capabilities.extensions[ID] of caps.
func AddCapabilities(caps *mcp.ServerCapabilities, exts []Extension) {
	for _, e := range exts {
		if cp, ok := e.(CapabilityProvider); ok {
			caps.AddExtension(e.ID(), cp.Capabilities())
		}
	}
}
