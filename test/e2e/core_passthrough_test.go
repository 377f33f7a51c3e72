package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tinyImage is the PNG server-everything's get-tiny-image returns, read
// from the installed server so the comparison is exact.
func tinyImage(t *testing.T) []byte {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "tools", "get-tiny-image.js"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`MCP_TINY_IMAGE\s*=\s*"([A-Za-z0-9+/=]+)"`).FindSubmatch(src)
	if m == nil {
		t.Fatal("cannot find MCP_TINY_IMAGE in server-everything's get-tiny-image.js")
	}
	png, err := base64.StdEncoding.DecodeString(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return png
}

func TestCallToolPassesResultsThrough(t *testing.T) {
	t.Parallel()
	servers := everythingOnly()
	sandbox := t.TempDir()
	servers["filesystem"] = stdioServer("filesystem", sandbox)
	cs, logs := startStdio(t, coreConfig(t, servers))

	open := func(query, tool string) {
		t.Helper()
		if got := search(t, cs, query, 10); !slices.Contains(got, tool) {
			t.Fatalf("search %q = %v, want %s", query, got, tool)
		}
	}

	// Image content: every block, in order, with mime type and bytes intact.
	open("tiny image logo", "everything__get-tiny-image")
	res := callTool(t, cs, "everything__get-tiny-image", map[string]any{})
	if res.IsError || len(res.Content) != 3 {
		t.Fatalf("get-tiny-image: isError=%v, %d content blocks, want 3: %s", res.IsError, len(res.Content), text(res))
	}
	if _, ok := res.Content[0].(*mcp.TextContent); !ok {
		t.Errorf("block 0 is %T, want text", res.Content[0])
	}
	img, ok := res.Content[1].(*mcp.ImageContent)
	if !ok {
		t.Fatalf("block 1 is %T, want image", res.Content[1])
	}
	if img.MIMEType != "image/png" {
		t.Errorf("image mimeType = %q, want image/png", img.MIMEType)
	}
	if want := tinyImage(t); !bytes.Equal(img.Data, want) {
		t.Errorf("image data: %d bytes, want the upstream's %d bytes", len(img.Data), len(want))
	}
	if last, ok := res.Content[2].(*mcp.TextContent); !ok || !strings.Contains(last.Text, "MCP logo") {
		t.Errorf("block 2 = %#v, want the closing text", res.Content[2])
	}

	// structuredContent.
	open("structured content weather", "everything__get-structured-content")
	res = callTool(t, cs, "everything__get-structured-content", map[string]any{"location": "Chicago"})
	if res.IsError {
		t.Fatalf("get-structured-content: %s", text(res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	var weather map[string]any
	if err := json.Unmarshal(b, &weather); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	if want := map[string]any{"temperature": 36.0, "conditions": "Light rain / drizzle", "humidity": 82.0}; !reflect.DeepEqual(weather, want) {
		t.Errorf("structuredContent = %s, want %v", b, want)
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(text(res)), &fromText); err != nil || !reflect.DeepEqual(fromText, weather) {
		t.Errorf("text content %q does not match structuredContent %s", text(res), b)
	}

	// A sum, with numbers passed through as numbers.
	open("add two numbers sum", "everything__get-sum")
	wantOK(t, "get-sum", callTool(t, cs, "everything__get-sum", map[string]any{"a": 2, "b": 3}), "is 5.")
	wantOK(t, "get-sum with fractions", callTool(t, cs, "everything__get-sum", map[string]any{"a": 0.5, "b": 0.25}), "is 0.75.")

	// An upstream isError result passes through as isError, with the
	// upstream's own message, not as a gateway failure.
	open("read the contents of a text file", "filesystem__read_text_file")
	res = callTool(t, cs, "filesystem__read_text_file", map[string]any{"path": "/etc/passwd"})
	if !res.IsError {
		t.Fatalf("reading /etc/passwd outside the sandbox succeeded: %s", text(res))
	}
	if strings.Contains(text(res), "call_tool:") || !strings.Contains(strings.ToLower(text(res)), "access denied") {
		t.Errorf("want the filesystem server's own access-denied message, got %q", text(res))
	}
	if strings.Contains(text(res), "root:") {
		t.Errorf("the refusal leaks the file: %q", text(res))
	}
	// The same tool inside the sandbox works, so the error above was the
	// upstream's decision.
	if err := os.WriteFile(filepath.Join(sandbox, "note.txt"), []byte("sandboxed text\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantOK(t, "read inside the sandbox", callTool(t, cs, "filesystem__read_text_file", map[string]any{"path": filepath.Join(sandbox, "note.txt")}), "sandboxed text")
	noPanic(t, logs.String())
}
