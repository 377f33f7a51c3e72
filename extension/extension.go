// Package extension is toolgate's public plug-in API. An extension is a
// self-contained bundle of gateway behaviour, identified by a reverse-DNS
// string whose last part is its name (the config key under "filters" and
// the folder of a built-in): "dev.toolgate/rate_limits" is configured as
// filters.rate_limits.
//
// An Extension is only its ID. What it contributes it declares by
// implementing optional interfaces, which the gateway discovers by type
// assertion (as Caddy discovers a module's Provisioner or Validator):
//
//   - CallMiddleware wraps every tool call (meta-tool call_tool, passthrough
//     tools/call, and tool calls the LLM proxy sees);
//   - VisibilityFilter decides which tools a caller may see (search results
//     and passthrough's tools/list); SearchFilter, ListFilter and LoadFilter
//     see search results for a query, a server's tool list and a run-time
//     server load;
//   - Provisioner, Validator and Closer are its lifecycle;
//   - Phaser places it in the pipeline (default PhaseInspect);
//   - ToolProvider and ResourceProvider serve tools and resources beside the
//     meta-tools, MethodProvider new request methods, and CapabilityProvider
//     settings advertised at capabilities.extensions[ID] (SEP-2133);
//   - CommandResolver and ServerAdmitter are hooks for pinning executables
//     and admitting whole servers.
//
// A minimal extension that logs every call:
//
//	type audit struct{}
//
//	func (audit) ID() string { return "com.example/audit" }
//	func (audit) WrapCall(next extension.CallHandler) extension.CallHandler {
//		return func(ctx context.Context, req *extension.CallRequest) (*extension.CallResult, error) {
//			log.Printf("call %s", req.ToolName)
//			return next(ctx, req)
//		}
//	}
//
// The gateway provisions every extension, then validates each, then serves;
// on shutdown it closes them. Everything an extension contributes is called
// concurrently and must be safe for concurrent use.
package extension

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Extension is the unit of plug-in: an identifier plus whichever optional
// interfaces of this package it implements.
type Extension interface {
	// ID is the reverse-DNS identifier, e.g. "com.example/audit". Its last
	// part is the extension's name (see Name).
	ID() string
}

// Name is the last part of an extension identifier: "audit" for
// "com.example/audit". It is the config key, the log attribute and the
// rule prefix of the extension.
func Name(id string) string {
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		return id[i+1:]
	}
	return id
}

// Provisioner prepares an extension: compile policies, open files.
// Construction must have no side effects; this is where they go.
type Provisioner interface {
	Provision(ctx context.Context, h Host) error
}

// Validator checks a provisioned extension is ready to serve.
type Validator interface {
	Validate() error
}

// Closer releases what Provision acquired.
type Closer interface {
	Close() error
}

// Phaser places an extension's filters and middleware in each pipeline.
// An extension that does not implement it is in PhaseInspect.
type Phaser interface {
	Phase() Phase
}

// PhaseOf is e's phase: e.Phase() if e is a Phaser, else PhaseInspect.
func PhaseOf(e Extension) Phase {
	if p, ok := e.(Phaser); ok {
		return p.Phase()
	}
	return PhaseInspect
}

// CallMiddleware wraps the tool-call path. WrapCall is called once when the
// pipeline is built; the handler it returns runs for every call. It may
// refuse (return an error made by Deny without calling next), rewrite (call
// next with req.WithArguments(...)), observe or time the call, or edit the
// result next returns. It must not modify req.
type CallMiddleware interface {
	WrapCall(next CallHandler) CallHandler
}

// VisibilityFilter decides which catalogued tools a caller may see at all:
// what search_tools may return (before the search filters, before
// truncation to top_k) and what tools/list shows in passthrough mode. It
// may drop tools; it must not modify them.
type VisibilityFilter interface {
	FilterVisible(ctx context.Context, req *VisibilityRequest, tools []SearchResult) ([]SearchResult, error)
}

// VisibilityRequest is who is about to be shown tools.
type VisibilityRequest struct {
	Session   string
	Principal string
	// Limit is how many of the tools, in order, will be shown: top_k for
	// a search, 0 for a listing (all of them). A filter that presents
	// tools elsewhere presents only as many as will be shown.
	Limit int
}

// SearchFilter may drop or reorder search results for a query; it runs
// after the visibility filters, before truncation to top_k, and only for
// searches (a passthrough listing has no query).
type SearchFilter interface {
	FilterSearch(ctx context.Context, req *SearchRequest, results []SearchResult) ([]SearchResult, error)
}

// ListFilter sees a server's tools before they are catalogued and may drop
// some: a dropped tool can be neither found nor called. It must not modify
// the definitions.
type ListFilter interface {
	FilterList(ctx context.Context, req *ListRequest, tools []*mcp.Tool) ([]*mcp.Tool, error)
}

// LoadFilter allows (nil) or denies a load_mcp_server call, before any
// connection is made. It may set req.AllowPrivateNetworks and append to
// req.DialChecks.
type LoadFilter interface {
	FilterLoad(ctx context.Context, req *LoadRequest) error
}

// ToolProvider serves tools beside the meta-tools (and beside the relayed
// tools in passthrough mode).
type ToolProvider interface {
	Tools() []Tool
}

// ResourceProvider serves resources beside the meta-tools.
type ResourceProvider interface {
	Resources() []Resource
}

// Phase orders filters within a pipeline. Phases run in this order; inside
// a phase built-in extensions run first, in config order, then the caller's
// extensions in the order given. For call middleware the first is the
// outermost: it sees the request first and the result last.
type Phase int

const (
	// PhaseObserve filters see every operation before any decision (audit).
	PhaseObserve Phase = iota
	// PhaseAdmit filters decide on admission (rate limits, load control).
	PhaseAdmit
	// PhaseAuthorize filters decide on permission (access control, policy).
	PhaseAuthorize
	// PhaseInspect filters look at content (arguments, results).
	PhaseInspect
)

func (p Phase) String() string {
	switch p {
	case PhaseObserve:
		return "observe"
	case PhaseAdmit:
		return "admit"
	case PhaseAuthorize:
		return "authorize"
	case PhaseInspect:
		return "inspect"
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// Host is what the gateway hands an extension when provisioning it.
type Host struct {
	// Logger is already tagged with the extension's name.
	Logger *slog.Logger
	// ConfigDir is the folder relative paths in the config resolve against.
	ConfigDir string
	// StateDir is where the extension may persist state.
	StateDir string
	// Tools returns a snapshot of every tool currently in the catalogue.
	// Never nil.
	Tools func() []ToolRef
	// Emit records an event in the audit log and event stream. It is never
	// nil (a no-op when nothing records events) and is safe to call
	// concurrently. Events must not carry secrets or raw argument values.
	Emit func(ctx context.Context, e Event)
}

// ToolRef is a catalogued tool.
type ToolRef struct {
	Server string
	Def    *mcp.Tool
}

// ListRequest is a server's tool list, seen when the server is first
// listed and whenever it is listed again (reconnect, list_changed).
type ListRequest struct {
	ServerName string
	// RunTime is set for servers connected by load_mcp_server.
	RunTime bool
	// Withheld, when set, is told about every tool a filter drops or
	// leaves uncallable; filters report through Withhold.
	Withheld func(tool, rule, reason string)
}

// Withhold tells the gateway why a filter drops tool, or keeps it listed
// but refuses calls to it: rule names the filter's rule (as in a Denial)
// and reason is public, safe to show the model (never a secret). The
// gateway reports it to whoever loaded the server. Safe on a request
// without a Withheld function.
func (r *ListRequest) Withhold(tool, rule, reason string) {
	if r != nil && r.Withheld != nil {
		r.Withheld(tool, rule, reason)
	}
}

// Event is a decision or detection worth recording. Type names the kind
// (one of the Event* constants, e.g. EventCrossServerBlocked); Fields holds
// what is specific to it.
type Event struct {
	Type    string
	Session string
	Server  string
	Tool    string
	Action  string
	Reason  string
	Fields  map[string]any
}

// SearchRequest is a search_tools call.
type SearchRequest struct {
	Query     string
	TopK      int
	Session   string
	Principal string
}

// SearchResult is one ranked tool.
type SearchResult struct {
	// Name is the qualified name server__tool.
	Name        string
	Server      string
	Tool        string
	Description string
	InputSchema any
	Score       float64
	// Def is the upstream definition; filters must not modify it.
	Def *mcp.Tool
}

// LoadRequest is a load_mcp_server call, seen before any connection is made.
type LoadRequest struct {
	ServerName string
	URL        string
	Session    string
	Principal  string
	// AllowPrivateNetworks lets the connection reach loopback, link-local
	// and private addresses; it starts false (deny_private_networks is on
	// for run-time loads) and a load filter may set it.
	AllowPrivateNetworks bool
	// DialChecks run on every address the connection to the server is
	// about to dial, after name resolution; an error refuses that
	// connection. Load filters append to it.
	DialChecks []func(addr netip.AddrPort) error
}

// Tool is an extra tool served beside the meta-tools.
type Tool struct {
	Tool    *mcp.Tool
	Handler mcp.ToolHandler
}

// Resource is an extra resource served beside the meta-tools.
type Resource struct {
	Resource *mcp.Resource
	Handler  mcp.ResourceHandler
}

var idPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+/[a-z0-9][a-z0-9._-]*$`)

// ValidateID checks a reverse-DNS identifier such as "com.example/audit".
func ValidateID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("extension id %q is not of the form vendor.prefix/name (e.g. com.example/audit)", id)
	}
	return nil
}

// CommandResolver is an optional interface for extensions that decide
// which executable a stdio server runs (e.g. pinning its hash). Before each
// start the gateway asks every resolver in order; the first non-empty path
// is launched instead of looking the command up in PATH, and any error
// stops the start.
type CommandResolver interface {
	ResolveCommand(ctx context.Context, server, command, dir string) (path string, err error)
}

// ServerAdmitter is an optional interface for extensions that admit or
// refuse whole servers (e.g. an allow list of servers). Passthrough mode
// asks every admitter before it lists or relays a server's resources,
// prompts and completions, which no tool filter sees; a refusal (any
// error) hides that server's items.
type ServerAdmitter interface {
	AdmitServer(ctx context.Context, server string) error
}
