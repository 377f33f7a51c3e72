package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/catalog"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/netguard"
	"github.com/toolgate/toolgate/internal/upstream"
)

// Limits of search_tools.
const (
	DefaultTopK = 5
	MaxTopK     = 50
	// maxCandidates bounds what the index hands the search filters, which
	// run before truncation to top_k.
	maxCandidates = 1000
	// searchChunk is the fewest candidates handed to the search filters
	// at once.
	searchChunk = 20
)

// scope says how a frontend's clients are told apart by the gate.
type scope int

const (
	// scopeConnection: stdio connections and stateful HTTP sessions; the
	// gate records what each session was shown.
	scopeConnection scope = iota
	// scopeStateless: 2026-07-28 stateless HTTP requests, which carry no
	// session; search_tools returns a signed discovery token that call_tool
	// must present.
	scopeStateless
)

const instructions = `toolgate connects you to many tool servers without listing every tool up front.
1. search_tools(query): describe in plain words what you want to do; it returns matching tools with their exact names (server__tool) and input schemas.
2. call_tool(tool_name, arguments): call a tool by the exact name search_tools returned, with arguments matching its input schema. Only tools that search_tools has returned to you can be called.
3. load_mcp_server(server_name, url): connect another MCP server by URL when asked to; its tools then become searchable.
If a call fails because of an expired or missing credential, ask the user to update the tokens file and retry. Never ask the user for a token or secret in the conversation.`

func (g *Gateway) newMCPServer(sc scope) (*mcp.Server, error) {
	opts := &mcp.ServerOptions{Instructions: instructions, Logger: sdkLogger(g.log)}
	if caps := extensionCapabilities(g.pipe.Extensions()); caps != nil {
		// The SDK's default (logging only) plus capabilities.extensions;
		// tools are added for the meta-tools as without them.
		//lint:ignore SA1019 the SDK's default advertises logging; advertising extensions must not drop it
		caps.Logging = &mcp.LoggingCapabilities{}
		opts.Capabilities = caps
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "toolgate", Title: "toolgate MCP gateway", Version: Version}, opts)
	if err := extension.AddMethods(s, g.pipe.Extensions()); err != nil {
		return nil, err
	}
	// Results are redacted on their way out by the seal every client-facing
	// server carries (see seal), not here.
	handle := func(h func(context.Context, scope, *mcp.CallToolRequest) (*mcp.CallToolResult, error)) mcp.ToolHandler {
		return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return h(ctx, sc, req)
		}
	}
	s.AddTool(searchToolDef(sc), handle(g.handleSearch))
	s.AddTool(callToolDef(sc), handle(g.handleCall))
	s.AddTool(loadToolDef(), handle(g.handleLoad))
	reserved := map[string]bool{"search_tools": true, "call_tool": true, "load_mcp_server": true}
	for _, e := range g.pipe.Extensions() {
		for _, t := range extTools(e) {
			if t.Tool == nil || t.Handler == nil {
				return nil, fmt.Errorf("extension %s: a contributed tool has no definition or handler", e.ID())
			}
			if reserved[t.Tool.Name] {
				return nil, fmt.Errorf("extension %s: tool %q is already served", e.ID(), t.Tool.Name)
			}
			reserved[t.Tool.Name] = true
			s.AddTool(t.Tool, t.Handler)
		}
		for _, r := range extResources(e) {
			if r.Resource == nil || r.Handler == nil {
				return nil, fmt.Errorf("extension %s: a contributed resource has no definition or handler", e.ID())
			}
			s.AddResource(r.Resource, r.Handler)
		}
	}
	return s, nil
}

func searchToolDef(sc scope) *mcp.Tool {
	out := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"tools": map[string]any{
				"type": "array",
				"items": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"name":        map[string]any{"type": "string"},
						"description": map[string]any{"type": "string"},
						"inputSchema": map[string]any{"type": "object"},
						"score":       map[string]any{"type": "number"},
						"alternatives": map[string]any{"type": "array", "items": map[string]any{"type": "string"},
							"description": "Other servers' tools that do the same thing; call_tool accepts any of them."},
						"query": map[string]any{"type": "string", "description": "Which of queries this tool was found for."},
					},
					"required": []string{"name", "description", "inputSchema", "score"},
				},
			},
			"note": map[string]any{"type": "string"},
		},
		"required": []string{"tools"},
	}
	if sc == scopeStateless {
		out["properties"].(map[string]any)["discovery_token"] = map[string]any{
			"type":        "string",
			"description": "Pass this to call_tool as discovery_token to call any tool in this result.",
		}
	}
	return &mcp.Tool{
		Name:  "search_tools",
		Title: "Search tools",
		Description: "Find tools for a task. Describe what you want to do in plain words; returns matching tools with their exact names, descriptions, input schemas and relevance scores. A tool must be found here before call_tool can run it. " +
			"For a task with several steps, pass \"queries\" with one short description per step (e.g. [\"find cheap flights to Rome\", \"add the trip to my calendar\", \"email the plan to Ana\"]) instead of one long query: you get the top tools for each step in one call. " +
			"When several servers offer the same tool, it is listed once with the others under \"alternatives\" (\"also offered by\"), so each slot is a different capability; any of them can be called.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"query": map[string]any{"type": "string", "description": "What you want to do, e.g. \"read a file\" or \"create a GitHub issue\"."},
				"queries": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "maxItems": MaxQueries,
					"description": "Several steps of a task, one description each; the top_k tools are returned for each. Use instead of query, or beside it."},
				"top_k": map[string]any{"type": "integer", "minimum": 1, "maximum": MaxTopK, "default": DefaultTopK, "description": "How many tools to return at most (for each query)."},
			},
		},
		OutputSchema: out,
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
	}
}

func callToolDef(sc scope) *mcp.Tool {
	props := map[string]any{
		"tool_name": map[string]any{"type": "string", "description": "The exact qualified name returned by search_tools, e.g. \"filesystem__read_file\"."},
		"arguments": map[string]any{"type": "object", "description": "Arguments matching the tool's input schema."},
	}
	required := []string{"tool_name"}
	if sc == scopeStateless {
		props["discovery_token"] = map[string]any{"type": "string", "description": "The discovery_token from the search_tools result that returned this tool."}
		required = append(required, "discovery_token")
	}
	return &mcp.Tool{
		Name:        "call_tool",
		Title:       "Call a tool",
		Description: "Run a tool that search_tools returned, by its exact qualified name, with arguments matching its input schema. Returns the tool's own result.",
		InputSchema: map[string]any{"type": "object", "properties": props, "required": required},
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true), DestructiveHint: ptr(true)},
	}
}

func loadToolDef() *mcp.Tool {
	return &mcp.Tool{
		Name:        "load_mcp_server",
		Title:       "Connect an MCP server",
		Description: "Connect a remote MCP server by URL (streamable HTTP, falling back to SSE) and index its tools so search_tools can find them.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"server_name": map[string]any{"type": "string", "description": "A short name for the server: letters, digits, '-', '_' or '.', without \"__\"."},
				"url":         map[string]any{"type": "string", "description": "The server's MCP endpoint, e.g. https://example.com/mcp."},
			},
			"required": []string{"server_name", "url"},
		},
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
	}
}

func ptr[T any](v T) *T { return &v }

// errorResult is a tool result the LLM can read and act on.
func errorResult(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// decodeArgs decodes a tool's raw arguments strictly into v, so a misspelt
// field is reported instead of silently ignored.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return fmt.Errorf("the arguments must be a JSON object, got %s", te.Value)
			}
			return fmt.Errorf("%q must be %s, got %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
			return fmt.Errorf("unknown argument %s", strings.TrimPrefix(msg, "json: unknown field "))
		}
		return fmt.Errorf("malformed arguments: %v", err)
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "int", "int64", "float64":
		return "a number"
	case "map", "struct":
		return "an object"
	case "slice":
		return "an array"
	}
	return goKind
}

// principalID names the authenticated caller of an MCP request over HTTP
// (see internal/auth), or "" (stdio, or no auth configured).
func principalID(req mcp.Request) string {
	if ex := req.GetExtra(); ex != nil {
		return auth.PrincipalOf(ex.TokenInfo).ID()
	}
	return ""
}

// withPrincipal puts the request's principal in ctx, for the events and
// filters of the request.
func withPrincipal(ctx context.Context, req mcp.Request) context.Context {
	if ex := req.GetExtra(); ex != nil {
		if p := auth.PrincipalOf(ex.TokenInfo); p != nil {
			return extension.WithPrincipal(ctx, p)
		}
	}
	return ctx
}

// sessionKey identifies the client session behind ss for the gate. HTTP
// sessions have an id; stdio connections get a random one. The record is
// dropped when the session ends.
func (g *Gateway) sessionKey(ss *mcp.ServerSession) string {
	if v, ok := g.sessions.Load(ss); ok {
		return v.(string)
	}
	key := ss.ID()
	if key == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		key = "conn-" + hex.EncodeToString(b[:])
	} else {
		key = "http-" + key
	}
	actual, loaded := g.sessions.LoadOrStore(ss, key)
	if !loaded {
		go func() {
			_ = ss.Wait()
			g.sessions.Delete(ss)
			if err := g.gate.Forget(context.Background(), key); err != nil {
				g.log.Warn("gate: forget ended session", "error", err)
			}
		}()
	}
	return actual.(string)
}

type searchArgs struct {
	Query   string   `json:"query"`
	Queries []string `json:"queries"`
	TopK    *int     `json:"top_k"`
}

// MaxQueries bounds search_tools' queries.
const MaxQueries = 10

// SearchOutput is search_tools' structured result.
type SearchOutput struct {
	Tools          []FoundTool `json:"tools"`
	Note           string      `json:"note,omitempty"`
	DiscoveryToken string      `json:"discovery_token,omitempty"`
}

// FoundTool is one tool in SearchOutput.
type FoundTool struct {
	Name        string  `json:"name"`
	Description string  `json:"description"`
	InputSchema any     `json:"inputSchema"`
	Score       float64 `json:"score"`
	// Alternatives are other servers' tools that do the same thing, any
	// of which call_tool accepts.
	Alternatives []string `json:"alternatives,omitempty"`
	// Query is the query of queries this tool was found for.
	Query string `json:"query,omitempty"`
}

func (g *Gateway) handleSearch(ctx context.Context, sc scope, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a searchArgs
	if err := decodeArgs(req.Params.Arguments, &a); err != nil {
		return errorResult("search_tools: %v. Expected {\"query\": \"what you want to do\", \"top_k\": 5}.", err), nil
	}
	queries := a.Queries
	if strings.TrimSpace(a.Query) != "" {
		queries = append([]string{a.Query}, queries...)
	}
	if len(queries) == 0 {
		return errorResult("search_tools: \"query\" is empty; describe what you want to do, e.g. \"read a file\", or pass \"queries\" with one description per step."), nil
	}
	if len(queries) > MaxQueries {
		return errorResult("search_tools: %d queries, at most %d; merge related steps.", len(queries), MaxQueries), nil
	}
	for i, q := range queries {
		if strings.TrimSpace(q) == "" {
			return errorResult("search_tools: queries[%d] is empty; describe one step of the task in each.", i), nil
		}
	}
	topK := DefaultTopK
	if a.TopK != nil {
		if *a.TopK < 1 || *a.TopK > MaxTopK {
			return errorResult("search_tools: top_k must be between 1 and %d, got %d.", MaxTopK, *a.TopK), nil
		}
		topK = *a.TopK
	}
	ctx = withPrincipal(ctx, req)
	sreq := &extension.SearchRequest{TopK: topK, Principal: principalID(req)}
	if sc == scopeConnection {
		sreq.Session = g.sessionKey(req.Session)
	}
	// Several queries: the top k of each, in order; a tool found for an
	// earlier query is not repeated.
	var results []Found
	var foundFor []string
	var notes []string
	seen := map[string]bool{}
	for _, q := range queries {
		r := *sreq
		r.Query = q
		res, note, err := g.Search(ctx, &r)
		if err != nil {
			if d, ok := extension.AsDenial(err); ok {
				return refusedResult(d, "search_tools was refused by %s: %s", d.Rule, d.Reason), nil
			}
			return errorResult("search_tools failed: %v", err), nil
		}
		if note != "" && !slices.Contains(notes, note) {
			notes = append(notes, note)
		}
		for _, x := range res {
			if seen[x.Name] {
				continue
			}
			seen[x.Name] = true
			results = append(results, x)
			foundFor = append(foundFor, q)
		}
	}
	names := make([]string, len(results))
	out := SearchOutput{Tools: make([]FoundTool, len(results)), Note: strings.Join(notes, " ")}
	for i, r := range results {
		names[i] = r.Name
		schema := r.InputSchema
		if schema == nil {
			schema = map[string]any{"type": "object"}
		}
		out.Tools[i] = FoundTool{Name: r.Name, Description: r.Description, InputSchema: schema, Score: round3(r.Score), Alternatives: r.Alternatives}
		if len(queries) > 1 {
			out.Tools[i].Query = foundFor[i]
		}
	}
	// Alternatives were returned too: the gate lets the model call them.
	for _, r := range results {
		names = append(names, r.Alternatives...)
	}
	// The gate records only what is actually returned: after the filters
	// and after truncation.
	switch sc {
	case scopeConnection:
		if err := g.gate.Record(ctx, sreq.Session, names...); err != nil {
			return errorResult("search_tools failed to record its results, so they could not be called; try again. (%v)", err), nil
		}
	case scopeStateless:
		if len(names) > 0 {
			out.DiscoveryToken = g.signer.Issue(sreq.Principal, names)
		}
	}
	fields := map[string]any{"query": queries[0], "top_k": topK, "results": names}
	if len(queries) > 1 {
		fields["queries"] = queries
	}
	g.emit(ctx, extension.Event{Type: audit.Search, Session: sreq.Session, Fields: fields})
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: renderSearch(queries, out, g.cfg.Filters.SimilarityThreshold)}},
		StructuredContent: out,
	}, nil
}

func round3(f float64) float64 { return float64(int(f*1000+0.5)) / 1000 }

// Search runs a search the way search_tools does: rank everything above
// the similarity threshold, pass the ranking through the search filters, then
// keep the top req.TopK. It returns the results and a note when the index is
// still being built.
func (g *Gateway) Search(ctx context.Context, req *extension.SearchRequest) ([]Found, string, error) {
	matches, res, err := g.cat.Search(ctx, req.Query, maxCandidates, g.cfg.Filters.SimilarityThreshold)
	if err != nil {
		return nil, "", err
	}
	results, err := g.filterEntries(ctx, req, g.diversify(matches, req.TopK))
	if err != nil {
		return nil, "", err
	}
	if len(results) > req.TopK {
		results = results[:req.TopK]
	}
	var notes []string
	if res.Partial {
		notes = append(notes, res.Note)
	}
	if n := g.startingNote(); n != "" {
		notes = append(notes, n)
	}
	return results, strings.Join(notes, " "), nil
}

// searchResult is t as a search result, its definition read from the
// catalogue's store.
func searchResult(t *catalog.Tool, score float64) extension.SearchResult {
	d := t.Def()
	return extension.SearchResult{Name: t.Qualified, Server: t.Server, Tool: t.Name,
		Description: d.Description, InputSchema: d.InputSchema, Score: score, Def: d}
}

func renderSearch(queries []string, out SearchOutput, threshold float64) string {
	var b strings.Builder
	quoted := make([]string, len(queries))
	for i, q := range queries {
		quoted[i] = strconv.Quote(q)
	}
	if len(out.Tools) == 0 {
		fmt.Fprintf(&b, "No tools matched %s (scores below %.2f are dropped). Try other words for the task, or a broader description.", strings.Join(quoted, ", "), threshold)
	} else {
		if len(queries) == 1 {
			fmt.Fprintf(&b, "Found %d tool(s) for %s:\n", len(out.Tools), quoted[0])
		} else {
			fmt.Fprintf(&b, "Found %d tool(s) for %d queries:\n", len(out.Tools), len(queries))
		}
		last := ""
		for i, t := range out.Tools {
			if t.Query != "" && t.Query != last {
				fmt.Fprintf(&b, "\nFor %q:\n", t.Query)
				last = t.Query
			}
			fmt.Fprintf(&b, "\n%d. %s (score %.3f)\n", i+1, t.Name, t.Score)
			if d := strings.TrimSpace(t.Description); d != "" {
				fmt.Fprintf(&b, "   %s\n", strings.ReplaceAll(d, "\n", "\n   "))
			}
			b.WriteString("   inputSchema: ")
			s, _ := json.Marshal(t.InputSchema)
			b.Write(s)
			b.WriteString("\n")
			if len(t.Alternatives) > 0 {
				fmt.Fprintf(&b, "   also offered by: %s (the same capability on other servers; their input schemas may differ)\n", strings.Join(t.Alternatives, ", "))
			}
		}
		b.WriteString("\nCall one with call_tool, using the exact name above")
		if out.DiscoveryToken != "" {
			b.WriteString(" and discovery_token: ")
			b.WriteString(out.DiscoveryToken)
		}
		b.WriteString(".")
	}
	if out.Note != "" {
		b.WriteString("\nNote: ")
		b.WriteString(out.Note)
	}
	return b.String()
}

type callArgs struct {
	ToolName       string          `json:"tool_name"`
	Arguments      json.RawMessage `json:"arguments"`
	DiscoveryToken string          `json:"discovery_token"`
}

func (g *Gateway) handleCall(ctx context.Context, sc scope, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a callArgs
	if err := decodeArgs(req.Params.Arguments, &a); err != nil {
		return errorResult("call_tool: %v. Expected {\"tool_name\": \"server__tool\", \"arguments\": {...}}.", err), nil
	}
	if err := checkObject(a.Arguments); err != nil {
		return errorResult("call_tool: %v", err), nil
	}
	creq := (&extension.CallRequest{ToolName: a.ToolName}).WithRawArguments(a.Arguments)
	ctx = withPrincipal(ctx, req)
	creq.Principal = principalID(req)
	if sc == scopeConnection {
		creq.Session = g.sessionKey(req.Session)
	}
	return g.Call(ctx, sc, creq, a.DiscoveryToken), nil
}

// checkObject reports why raw is not a tool call's arguments (a JSON
// object), without decoding it: a filter that reads them decodes them.
func checkObject(raw json.RawMessage) error {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return nil
	}
	if t[0] != '{' || !json.Valid(t) {
		_, err := extension.DecodeArguments(t)
		return err
	}
	return nil
}

// Call runs a call_tool request: the discovery gate first, always, then the
// shared call path (call.go). Every refusal is an isError result.
func (g *Gateway) Call(ctx context.Context, sc scope, req *extension.CallRequest, token string) *mcp.CallToolResult {
	res, r := g.runMeta(ctx, sc, req, token, nil)
	if r == nil {
		var out *mcp.CallToolResult
		if out, r = decoded(res, req.Tool, "call_tool: "); r == nil {
			return out
		}
	}
	return r.ToolResult(req.ToolName)
}

// runMeta is the upstream leg of call_tool: the name check and the
// discovery gate, then the shared call path.
func (g *Gateway) runMeta(ctx context.Context, sc scope, req *extension.CallRequest, token string, opts *callOpts) (*extension.CallResult, *Refusal) {
	return g.runCall(ctx, req, opts, func() *Refusal {
		server, tool, ok := catalog.Split(req.ToolName)
		if !ok {
			return refuse("malformed_name", "call_tool: %q is not a tool name from search_tools; names have the form server__tool. Call search_tools to find the tool first.", req.ToolName)
		}
		req.ServerName, req.Tool = server, tool
		// The discovery gate. It cannot be configured off.
		switch sc {
		case scopeStateless:
			if err := g.signer.Verify(token, req.Principal, req.ToolName); err != nil {
				return refuse("discovery_gate", "call_tool: %q cannot be called: %v. Call search_tools to find the tool, then pass its discovery_token to call_tool.", req.ToolName, err)
			}
		default:
			seen, err := g.gate.Has(ctx, req.Session, req.ToolName)
			if err != nil {
				g.log.Error("gate lookup failed; refusing", "error", err)
				return refuse("discovery_gate_error", "call_tool: the discovery record could not be checked, so %q was not called; try again.", req.ToolName)
			}
			if !seen {
				return refuse("discovery_gate", "call_tool: %q has not been returned by search_tools in this session. Call search_tools with a description of the task first, then call the tool by the exact name it returns.", req.ToolName)
			}
		}
		return nil
	})
}

// intercepted records the gateway's decision on a call.
func (g *Gateway) intercepted(ctx context.Context, req *extension.CallRequest, action, reason string) error {
	fields := make(map[string]any, 3)
	fields["phase"] = "request"
	if t, ok := g.cat.Lookup(req.ToolName); ok {
		fields["tool_hash"] = t.Hash
	}
	if req.Principal == OperatorPrincipal && req.Session == OperatorSession {
		fields["operator"] = true
	}
	err := g.record(ctx, extension.Event{Type: audit.ToolCallIntercepted, Session: req.Session, Server: req.ServerName, Tool: req.Tool, Action: action, Reason: reason, Fields: fields})
	if err != nil {
		g.log.Error("audit: event not recorded", "type", audit.ToolCallIntercepted, "error", err)
	}
	return err
}

// refusedResult is the isError result of a denial. Its structuredContent
// carries the JSON-RPC error an MCP proxy would have answered with, so a
// client can tell the class of Refusal apart:
// {"error": {"code": -32001, "message": "..."}, "rule": "..."}.
func refusedResult(d *extension.Denial, format string, args ...any) *mcp.CallToolResult {
	res := errorResult(format, args...)
	res.StructuredContent = map[string]any{"error": d.RPCError(), "rule": d.Rule}
	return res
}

func upstreamError(prefix string, srv *upstream.Server, tool string, err error) *mcp.CallToolResult {
	return errorResult("%sserver %q failed to run %q: %v. If the error looks temporary, retry once; if it fails again, tell the user.", prefix, srv.Name(), tool, err)
}

type loadArgs struct {
	ServerName string `json:"server_name"`
	URL        string `json:"url"`
}

func (g *Gateway) handleLoad(ctx context.Context, sc scope, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a loadArgs
	if err := decodeArgs(req.Params.Arguments, &a); err != nil {
		return errorResult("load_mcp_server: %v. Expected {\"server_name\": \"name\", \"url\": \"https://host/mcp\"}.", err), nil
	}
	lreq := &extension.LoadRequest{ServerName: a.ServerName, URL: a.URL}
	ctx = withPrincipal(ctx, req)
	lreq.Principal = principalID(req)
	if sc == scopeConnection {
		lreq.Session = g.sessionKey(req.Session)
	}
	out, err := g.Load(ctx, lreq)
	if err != nil {
		if d, ok := extension.AsDenial(err); ok {
			return errorResult("load_mcp_server: loading %q was refused by %s: %s", a.ServerName, d.Rule, d.Reason), nil
		}
		return errorResult("load_mcp_server: %v", err), nil
	}
	held := out.Held
	if held == nil {
		held = []HeldTool{}
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: loadMessage(a.ServerName, out)}},
		StructuredContent: map[string]any{"server_name": a.ServerName, "tools": out.Usable, "listed": out.Listed, "blocked": held},
	}, nil
}

// Load connects a remote server at run time: it validates the request, runs
// the load filters before any connection is made, then connects, lists and
// indexes. It returns how many tools were listed, how many the model can
// use, and why each other one cannot be used. A list over the tool-count
// limits fails the load.
func (g *Gateway) Load(ctx context.Context, req *extension.LoadRequest) (ListOutcome, error) {
	if err := config.ValidateServerName(req.ServerName); err != nil {
		return ListOutcome{}, err
	}
	if err := config.ValidateURL(req.URL); err != nil {
		return ListOutcome{}, err
	}
	if _, exists := g.ups.Get(req.ServerName); exists {
		return ListOutcome{}, fmt.Errorf("a server named %q is already connected; choose another name", req.ServerName)
	}
	if conf, ok := g.cfg.Servers[req.ServerName]; ok && conf.DisabledReason != "" {
		// Its entry holds unresolved variables: connecting would send
		// "$TOKEN" as a header, and any other URL would impersonate it.
		return ListOutcome{}, fmt.Errorf("the configured server %q is disabled: %s", req.ServerName, conf.DisabledReason)
	}
	if conf, ok := g.cfg.Servers[req.ServerName]; ok && !(conf.IsRemote() && sameURL(conf.URL, req.URL)) {
		// A configured (e.g. disabled) server's name is not free for a
		// different URL: that would impersonate it.
		return ListOutcome{}, fmt.Errorf("the name %q belongs to a server in the config at another address; choose another name", req.ServerName)
	}
	// A zone or a number only some resolvers read as an address would
	// make the host mean one thing to a filter and another to the dialer.
	if u, err := url.Parse(req.URL); err != nil || netguard.CheckHost(u.Hostname()) != nil {
		herr := errors.New("the URL cannot be parsed")
		if err == nil {
			herr = netguard.CheckHost(u.Hostname())
		}
		g.emit(ctx, extension.Event{Type: audit.ServerLoadDenied, Session: req.Session, Server: req.ServerName, Action: "block", Reason: "url", Fields: map[string]any{"url": req.URL}})
		return ListOutcome{}, &extension.Denial{Rule: "load.url", Reason: herr.Error(), Detail: herr.Error(), Code: extension.CodePermissionDenied}
	}
	if err := g.pipe.Load(ctx, req); err != nil {
		reason := "load_filter"
		if d, ok := extension.AsDenial(err); ok {
			reason = d.Rule
		}
		g.emit(ctx, extension.Event{Type: audit.ServerLoadDenied, Session: req.Session, Server: req.ServerName, Action: "block", Reason: reason, Fields: map[string]any{"url": req.URL}})
		return ListOutcome{}, err
	}
	cfg := &config.Server{Name: req.ServerName, URL: req.URL, Transport: config.TransportStreamableHTTP}
	configured := false
	if conf, ok := g.cfg.Servers[req.ServerName]; ok && conf.IsRemote() && sameURL(conf.URL, req.URL) {
		// The config declares this very server (e.g. disabled until
		// needed): use its entry, headers and transport included. The
		// operator wrote its URL, so it may be on a private network like
		// any configured server.
		cfg, configured = conf, true
	}
	// Every address the connection dials is checked, after name
	// resolution: a name, an /etc/hosts alias or a redirect cannot reach
	// what the URL checks above would have refused.
	var checks []netguard.Check
	if !req.AllowPrivateNetworks && !configured {
		checks = append(checks, netguard.DenyPrivate)
	}
	for _, c := range req.DialChecks {
		checks = append(checks, netguard.Check(c))
	}
	var sopts []upstream.ServerOption
	if check := netguard.Chain(checks...); check != nil {
		sopts = append(sopts, upstream.WithDialCheck(check))
	}
	srv, err := g.ups.Add(cfg, sopts...)
	if err != nil {
		return ListOutcome{}, err
	}
	tools, err := srv.ListTools(ctx)
	if err != nil {
		f := srv.StartFailure(err)
		g.ups.Remove(req.ServerName)
		// The error may quote the server's answer; for a URL a model
		// chose, that can be an internal page. The log has it (redacted),
		// the model only the class of failure.
		g.log.Warn("loading a server at run time failed", "server", req.ServerName, "class", f.Class, "error", g.redactString(err.Error()))
		if f.Class == upstream.FailureRefused {
			rule := "deny_private_networks"
			if !errors.Is(f.Refusal, netguard.ErrPrivate) {
				rule = "load_control.deny_url_patterns"
			}
			g.emit(ctx, extension.Event{Type: audit.ServerLoadDenied, Session: req.Session, Server: req.ServerName, Action: "block", Reason: rule, Fields: map[string]any{"url": req.URL}})
			return ListOutcome{}, &extension.Denial{Rule: rule, Reason: "the server's address is on a network this gateway does not load servers from", Detail: f.Refusal.Error(), Code: extension.CodePermissionDenied}
		}
		if f.Class == upstream.FailureHTTPStatus && (f.Status == 401 || f.Status == 403) {
			return ListOutcome{}, errors.New(g.authMessage(ctx, req.ServerName))
		}
		return ListOutcome{}, fmt.Errorf("could not connect to %q: %s", req.ServerName, f)
	}
	out, err := g.catalogue(ctx, req.ServerName, tools, true)
	if err != nil {
		g.ups.Remove(req.ServerName)
		g.recorded.forget(req.ServerName)
		return ListOutcome{}, err
	}
	g.emit(ctx, extension.Event{Type: audit.ServerLoaded, Session: req.Session, Server: req.ServerName, Action: "allow", Fields: map[string]any{"url": req.URL, "tools": out.Usable, "listed": out.Listed}})
	g.log.Info("loaded server at run time", "server", req.ServerName, "tools", out.Usable, "listed", out.Listed)
	g.shareLoad(ctx, req)
	return out, nil
}
