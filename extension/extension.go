// Package extension is toolgate's public plug-in API. An extension is a
// self-contained bundle of gateway behaviour, identified by a reverse-DNS
// string, that contributes filters to the search, call, load and response
// pipelines and extra tools or resources served beside the meta-tools.
//
// Embed Base to get a default for every method and override only what the
// extension needs:
//
//	type audit struct{ extension.Base }
//
//	func (audit) ID() string { return "com.example/audit" }
//	func (a audit) CallFilter() extension.CallFilter {
//		return func(ctx context.Context, c *extension.CallRequest) error {
//			log.Printf("call %s", c.ToolName)
//			return nil
//		}
//	}
//
// The gateway provisions every extension, then validates each, then serves;
// on shutdown it closes them. Filters are called concurrently and must be
// safe for concurrent use.
package extension

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"regexp"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Extension is the unit of plug-in. Implementations embed Base.
type Extension interface {
	// ID is the reverse-DNS identifier, e.g. "com.example/audit".
	ID() string
	// Phase places the extension's filters in each pipeline.
	Phase() Phase
	// Provision prepares the extension: compile policies, open files.
	// Construction must have no side effects; this is where they go.
	Provision(ctx context.Context, h Host) error
	// Validate checks the provisioned extension is ready to serve.
	Validate() error
	// Close releases what Provision acquired.
	Close() error

	SearchFilter() SearchFilter
	CallFilter() CallFilter
	LoadFilter() LoadFilter
	ResponseFilter() ResponseFilter
	ListFilter() ListFilter
	// Tools and Resources are served beside the meta-tools.
	Tools() []Tool
	Resources() []Resource
}

// Base gives every Extension method a default except ID.
type Base struct{}

func (Base) Phase() Phase                                { return PhaseInspect }
func (Base) Provision(ctx context.Context, h Host) error { return nil }
func (Base) Validate() error                             { return nil }
func (Base) Close() error                                { return nil }
func (Base) SearchFilter() SearchFilter                  { return nil }
func (Base) CallFilter() CallFilter                      { return nil }
func (Base) LoadFilter() LoadFilter                      { return nil }
func (Base) ResponseFilter() ResponseFilter              { return nil }
func (Base) ListFilter() ListFilter                      { return nil }
func (Base) Tools() []Tool                               { return nil }
func (Base) Resources() []Resource                       { return nil }

// Phase orders filters within a pipeline. Phases run in this order; inside
// a phase built-in extensions run first, in config order, then the caller's
// extensions in the order given.
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

// ListFilter sees a server's tools before they are catalogued and may drop
// some: a dropped tool can be neither found nor called. It must not modify
// the definitions.
type ListFilter func(ctx context.Context, req *ListRequest, tools []*mcp.Tool) ([]*mcp.Tool, error)

// Event is a decision or detection worth recording. Type names the kind
// (e.g. "cross_server_blocked", "detection"); Fields holds what is specific
// to it.
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

// CallRequest is a call_tool invocation. Filters may replace Arguments to
// rewrite the call; other fields are informational.
type CallRequest struct {
	// ToolName is the qualified name server__tool.
	ToolName   string
	ServerName string
	// Tool is the name on the upstream server.
	Tool      string
	Arguments map[string]any
	Session   string
	Principal string
	// Def is the upstream's definition of the tool (annotations included);
	// filters must not modify it.
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

// SearchFilter may drop results; it runs before truncation to top_k.
type SearchFilter func(ctx context.Context, req *SearchRequest, results []SearchResult) ([]SearchResult, error)

// CallFilter allows a call (nil), denies it (an error made by Deny), or
// rewrites it by changing req.Arguments. Any other error denies the call
// (fail closed) with a generic message; its text is logged, not shown.
type CallFilter func(ctx context.Context, req *CallRequest) error

// LoadFilter allows (nil) or denies a server load.
type LoadFilter func(ctx context.Context, req *LoadRequest) error

// ResponseFilter sees an upstream result and returns it (possibly edited) or
// an error to deny it.
type ResponseFilter func(ctx context.Context, req *CallRequest, res *mcp.CallToolResult) (*mcp.CallToolResult, error)

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
