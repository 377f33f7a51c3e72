package gateway

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/catalog"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/llmproxy"
)

// llmOwner is a (server, tool) a name in an LLM response may refer to.
type llmOwner struct {
	server, tool string
	def          *mcp.Tool // the catalogue's definition, nil for mapped tools
}

// llmOwners is the registry lookup of the LLM proxy: which MCP servers own
// a tool name the model wrote. In order: the llm_proxy.tools map, a
// qualified name in the catalogue (server__tool), Claude Code's
// mcp__server__tool, then every catalogued tool of that bare name (several
// servers may offer one; each is judged).
func (g *Gateway) llmOwners(name string) []llmOwner {
	if p := g.cfg.LLMProxy; p != nil {
		if server, ok := p.Tools[name]; ok {
			o := llmOwner{server: server, tool: name}
			if t, ok := g.cat.Lookup(catalog.Qualify(server, name)); ok {
				o.def = t.Def
			}
			return []llmOwner{o}
		}
	}
	for _, q := range []string{name, strings.TrimPrefix(name, "mcp__")} {
		if t, ok := g.cat.Lookup(q); ok {
			if s, tool, ok := catalog.Split(q); ok && s == t.Server && tool == t.Name {
				return []llmOwner{{server: t.Server, tool: t.Name, def: t.Def}}
			}
		}
	}
	var out []llmOwner
	for _, t := range g.cat.All() {
		if t.Name == name {
			out = append(out, llmOwner{server: t.Server, tool: t.Name, def: t.Def})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].server < out[j].server })
	return out
}

// EvaluateLLMCall judges a tool call read from an LLM API response with the
// same call filters call_tool runs (cross_server, rate_limits,
// version_pinning, access_control, rego, extmcp, ... in phase order); the
// first refusal wins. The upstream is not called: the agent runs the tool
// itself. The definition hashed for version_pinning is the one the model
// was given in the request, with the catalogue's annotations (LLM APIs
// carry none). Every allow and block is recorded as tool_call_intercepted
// with phase "llm_response".
func (g *Gateway) EvaluateLLMCall(ctx context.Context, c llmproxy.Call) llmproxy.Decision {
	owners := g.llmOwners(c.Name)
	if len(owners) == 0 {
		if p := g.cfg.LLMProxy; p != nil && p.FailClosed {
			d := llmproxy.Decision{Action: llmproxy.Block, Rule: "llm_proxy.fail_closed",
				Reason: fmt.Sprintf("tool %q belongs to no MCP server toolgate knows, and unknown tools are refused (fail_closed)", c.Name)}
			g.llmRecord(ctx, c, llmOwner{tool: c.Name}, nil, d)
			return d
		}
		return llmproxy.Decision{Action: llmproxy.Skip}
	}
	for _, o := range owners {
		def := o.def
		if c.Def != nil {
			d := *c.Def
			d.Name = o.tool
			if o.def != nil {
				d.Annotations = o.def.Annotations
			}
			def = &d
		}
		args := c.Arguments
		if args == nil {
			args = map[string]any{}
		}
		req := &extension.CallRequest{ToolName: catalog.Qualify(o.server, o.tool), ServerName: o.server, Tool: o.tool, Arguments: args, Session: c.Session, Def: def}
		if err := g.pipe.Call(ctx, req); err != nil {
			d := llmproxy.Decision{Action: llmproxy.Block, Rule: "filter", Reason: "refused by a policy check"}
			if den, ok := extension.AsDenial(err); ok {
				d.Rule, d.Reason = den.Rule, den.Reason
			}
			g.llmRecord(ctx, c, o, req, d)
			return d
		}
		g.llmRecord(ctx, c, o, req, llmproxy.Decision{Action: llmproxy.Allow})
	}
	return llmproxy.Decision{Action: llmproxy.Allow}
}

func (g *Gateway) llmRecord(ctx context.Context, c llmproxy.Call, o llmOwner, req *extension.CallRequest, d llmproxy.Decision) {
	fields := map[string]any{"phase": "llm_response", "provider": c.Provider, "llm_tool": c.Name}
	if c.ID != "" {
		fields["call_id"] = c.ID
	}
	if req != nil {
		if req.Def != nil {
			fields["tool_hash"] = catalog.DefinitionHash(req.Def)
		}
		k, v := g.argsField(req.Arguments)
		fields[k] = v
	}
	if d.Reason != "" {
		fields["message"] = d.Reason
	}
	g.emit(ctx, extension.Event{Type: audit.ToolCallIntercepted, Session: c.Session, Server: o.server, Tool: o.tool, Action: d.Action, Reason: d.Rule, Fields: fields})
}

// LLMProxyConfig is the config's llm_proxy object, or nil.
func (g *Gateway) LLMProxyConfig() *config.LLMProxy { return g.cfg.LLMProxy }

// LLMInspector scans what agents send their models through the LLM proxy,
// or returns nil when the config asks for no scanning.
func (g *Gateway) LLMInspector() llmproxy.Inspector { return nil }
