package gateway

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/catalog"
)

// OperatorSession and OperatorPrincipal mark the calls the operator makes
// from the shell (toolgate call) in filters and the audit log. Client
// sessions are named conn-... or http-..., so neither collides.
const (
	OperatorSession   = "operator"
	OperatorPrincipal = "operator"
)

// OperatorCall runs one tool call for the operator: every call filter, the
// audit record, the upstream call and the response filters, exactly as
// call_tool runs them, but not the discovery gate, which protects against
// an LLM calling what it was never shown, not against the person who runs
// the gateway. The decision is recorded with session "operator" and the
// field operator=true. A refusal is an isError result, as for call_tool, and
// secrets are masked in the result as they are for a client.
func (g *Gateway) OperatorCall(ctx context.Context, toolName string, args map[string]any) *mcp.CallToolResult {
	if args == nil {
		args = map[string]any{}
	}
	req := (&extension.CallRequest{ToolName: toolName, Session: OperatorSession, Principal: OperatorPrincipal}).WithArguments(args)
	res, r := g.runCall(ctx, req, nil, func() *Refusal {
		server, tool, ok := catalog.Split(toolName)
		if !ok {
			return refuse("malformed_name", "%q is not a tool name; names have the form server__tool (see toolgate tools)", toolName)
		}
		req.ServerName, req.Tool = server, tool
		return nil
	})
	var out *mcp.CallToolResult
	if r == nil {
		out, r = decoded(res, req.Tool, "call_tool: ")
	}
	if r != nil {
		return r.ToolResult(toolName)
	}
	// No MCP server (and so no seal) stands between this result and the
	// terminal or script that asked for it.
	return g.redactResult(out)
}
