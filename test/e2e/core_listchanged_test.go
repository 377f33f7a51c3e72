package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// server-everything registers all its tools before the first tools/list
// answer, so its list never visibly changes at run time. The test binary
// therefore doubles as a small upstream whose tool list the test changes:
// with fakeUpstreamVar set it serves MCP over stdio instead of running tests.
const fakeUpstreamVar = "TOOLGATE_E2E_FAKE_UPSTREAM"

func init() {
	if os.Getenv(fakeUpstreamVar) == "listchanged" {
		os.Exit(runListChangedUpstream())
	}
}

// runListChangedUpstream serves add-tool and remove-tool, which add and
// remove echo-like tools at run time (the SDK then notifies
// tools/list_changed).
func runListChangedUpstream() int {
	srv := mcp.NewServer(&mcp.Implementation{Name: "fake-listchanged", Version: "1"}, nil)
	type nameArgs struct {
		Name        string `json:"name" jsonschema:"the tool's name"`
		Description string `json:"description,omitempty" jsonschema:"the tool's description"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "add-tool", Description: "Register a new dynamic tool at run time with a name and description."},
		func(_ context.Context, _ *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
			name := a.Name
			srv.AddTool(&mcp.Tool{Name: name, Description: a.Description, InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "dynamic tool " + name + " ran"}}}, nil
				})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added " + name}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "remove-tool", Description: "Unregister a dynamic tool at run time by name."},
		func(_ context.Context, _ *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
			srv.RemoveTools(a.Name)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "removed " + a.Name}}}, nil, nil
		})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "fake upstream:", err)
		return 1
	}
	return 0
}

func TestToolsListChangedReindexes(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := coreConfig(t, map[string]any{
		"fake": map[string]any{"command": self, "env": map[string]any{fakeUpstreamVar: "listchanged"}},
	})
	cs, logs := startStdio(t, cfg)

	const query = "count zebra crossings"
	if got := search(t, cs, query, 5); len(got) != 0 {
		t.Fatalf("search %q before the tool exists = %v", query, got)
	}
	if got := search(t, cs, "register a new dynamic tool", 5); !slices.Contains(got, "fake__add-tool") {
		t.Fatalf("search = %v, want fake__add-tool", got)
	}
	if got := search(t, cs, "unregister a dynamic tool", 5); !slices.Contains(got, "fake__remove-tool") {
		t.Fatalf("search = %v, want fake__remove-tool", got)
	}
	wantRefused(t, "new tool before it exists", callTool(t, cs, "fake__zebra-counter", map[string]any{}), "search_tools")

	wantOK(t, "add-tool", callTool(t, cs, "fake__add-tool", map[string]any{"name": "zebra-counter", "description": "Counts zebra crossings on a street."}), "added")
	if !waitFor(30*time.Second, func() bool { return slices.Contains(search(t, cs, query, 5), "fake__zebra-counter") }) {
		t.Fatalf("the tool added at run time never became searchable\nlogs:\n%s", logs)
	}
	wantOK(t, "the new tool", callTool(t, cs, "fake__zebra-counter", map[string]any{}), "dynamic tool zebra-counter ran")

	wantOK(t, "remove-tool", callTool(t, cs, "fake__remove-tool", map[string]any{"name": "zebra-counter"}), "removed")
	if !waitFor(30*time.Second, func() bool { return !slices.Contains(search(t, cs, query, 5), "fake__zebra-counter") }) {
		t.Fatalf("the tool removed at run time is still found\nlogs:\n%s", logs)
	}
	// It was found in this session earlier, but it is gone now.
	wantRefused(t, "the removed tool", callTool(t, cs, "fake__zebra-counter", map[string]any{}), "not available")
	// The others are untouched.
	if got := search(t, cs, "register a new dynamic tool", 5); !slices.Contains(got, "fake__add-tool") {
		t.Fatalf("search after re-indexing = %v, want fake__add-tool", got)
	}
	noPanic(t, logs.String())
}
