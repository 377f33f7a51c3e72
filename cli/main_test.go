package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	_ "github.com/toolgate/toolgate/extensions/all"
)

// envTestServer makes the test binary an MCP server over stdio instead of
// running tests: configs in these tests start os.Args[0] with it set, so
// the commands run against a real upstream process without node_modules.
const (
	envTestServer = "TOOLGATE_CLI_TEST_SERVER"
	// envMarker names a file the test server creates when it starts.
	envMarker = "TOOLGATE_CLI_TEST_MARKER"
)

func TestMain(m *testing.M) {
	if os.Getenv(envTestServer) != "" {
		serveTestServer()
		return
	}
	os.Exit(m.Run())
}

// serveTestServer serves three file tools and echo on stdio.
func serveTestServer() {
	if p := os.Getenv(envMarker); p != "" {
		_ = os.WriteFile(p, []byte("started"), 0o600)
	}
	fmt.Fprintln(os.Stderr, "cli-test-server: ready")
	s := mcp.NewServer(&mcp.Implementation{Name: "cli-test", Version: "1"}, nil)
	type msg struct {
		Message string `json:"message"`
	}
	type path struct {
		Path string `json:"path"`
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo a message back unchanged."},
		func(_ context.Context, _ *mcp.CallToolRequest, a msg) (*mcp.CallToolResult, any, error) {
			return text("echo: " + a.Message), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "read_file", Description: "Read a file from disk and return its contents."},
		func(_ context.Context, _ *mcp.CallToolRequest, a path) (*mcp.CallToolResult, any, error) {
			return text("contents of " + a.Path), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "read_file_lines", Description: "Read some lines of a file."},
		func(_ context.Context, _ *mcp.CallToolRequest, a path) (*mcp.CallToolResult, any, error) {
			return text("lines of " + a.Path), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "write_file", Description: "Write a file to disk."},
		func(_ context.Context, _ *mcp.CallToolRequest, a path) (*mcp.CallToolResult, any, error) {
			return text("wrote " + a.Path), nil, nil
		})
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
}

// testConfig writes a config in a new folder with one stdio server, "fs",
// which is this test binary serving the tools above, lexical search (no
// model needed) and the given filters. extra entries are merged into the
// server's entry.
func testConfig(t *testing.T, filters map[string]any, extra map[string]any) string {
	t.Helper()
	srv := map[string]any{"command": os.Args[0], "env": map[string]string{envTestServer: "1"}}
	for k, v := range extra {
		srv[k] = v
	}
	cfg := map[string]any{
		"mcpServers": map[string]any{"fs": srv},
		"search":     map[string]any{"mode": "lexical"},
	}
	if filters != nil {
		cfg["filters"] = filters
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// result is what one command run left.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// runCLI runs the command line as main would, with stdin.
func runCLI(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb, nil)
	return result{code, out.String(), errb.String()}
}
