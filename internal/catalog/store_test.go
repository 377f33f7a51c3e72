package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/search"
)

func schemaOf(props ...string) map[string]any {
	p := map[string]any{}
	for _, n := range props {
		p[n] = map[string]any{"type": "string", "description": "the " + n}
	}
	return map[string]any{"type": "object", "properties": p, "required": []any{props[0]}}
}

// The definition a tool's Def returns is the one listed, read back from
// the file in the state folder: schema, annotations and all.
func TestStoredDefinitionRoundTrip(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(search.NewLexical(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := &mcp.Tool{Name: "read_file", Title: "Read", Description: "Read a file.\nSecond line.",
		InputSchema: schemaOf("path", "encoding"), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		OutputSchema: map[string]any{"type": "object"}, Meta: mcp.Meta{"x": "y"}}
	if err := c.SetServer(context.Background(), "fs", []*mcp.Tool{want}); err != nil {
		t.Fatal(err)
	}
	tl, _ := c.Lookup("fs__read_file")
	got := tl.Def()
	if !reflect.DeepEqual(got.InputSchema, want.InputSchema) || got.Description != want.Description || got.Title != "Read" ||
		got.Annotations == nil || !got.Annotations.ReadOnlyHint || got.Meta["x"] != "y" || got.OutputSchema == nil {
		t.Fatalf("Def = %+v, want %+v", got, want)
	}
	if tl.Hash != DefinitionHash(want) || DefinitionHash(got) != tl.Hash {
		t.Fatalf("hash of the stored definition differs: %s, %s, %s", tl.Hash, DefinitionHash(want), DefinitionHash(got))
	}
	if tl.Summary != "Read a file." {
		t.Fatalf("Summary = %q", tl.Summary)
	}
	// The file is the process's own: nothing is left in the folder.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "tooldefs-") {
			t.Errorf("store file %s visible in the state folder", e.Name())
		}
	}
}

// Byte-identical schemas are stored once; replacing and removing tools
// turns their blobs into garbage that compaction reclaims, and the tools
// still listed read back intact after it.
func TestStoreSharesSchemasAndCompacts(t *testing.T) {
	ctx := context.Background()
	c, err := Open(search.NewLexical(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var defs []*mcp.Tool
	for i := range 100 {
		defs = append(defs, &mcp.Tool{Name: fmt.Sprintf("t%d", i), Description: "same schema", InputSchema: schemaOf("id", "name")})
	}
	if err := c.SetServer(ctx, "a", defs); err != nil {
		t.Fatal(err)
	}
	if _, _, blobs := c.StoreSize(); blobs != 101 {
		t.Fatalf("100 tools with one schema: %d blobs, want 101", blobs)
	}
	defer func(n int64) { compactMin = n }(compactMin)
	compactMin = 64 << 10
	big := strings.Repeat("x", 1<<10)
	keep := &mcp.Tool{Name: "keep", Description: "kept", InputSchema: schemaOf("k")}
	for round := range 4 {
		var defs []*mcp.Tool
		for i := range 100 {
			defs = append(defs, &mcp.Tool{Name: fmt.Sprintf("t%d", i), Description: fmt.Sprintf("%d %s", round, big), InputSchema: schemaOf("id")})
		}
		if err := c.SetServer(ctx, "b", append(defs, keep)); err != nil {
			t.Fatal(err)
		}
	}
	size, garbage, _ := c.StoreSize()
	if live := size - garbage; size > 2*live+compactMin || garbage > compactMin+live {
		t.Fatalf("store holds %d bytes for %d live: not compacted", size, live)
	}
	c.RemoveServer("a")
	tl, ok := c.Lookup("b__keep")
	if !ok || tl.Def().Description != "kept" || !reflect.DeepEqual(tl.Def().InputSchema, schemaOf("k")) {
		t.Fatalf("after compaction: %+v", tl.Def())
	}
	tl, _ = c.Lookup("b__t7")
	if d := tl.Def(); !strings.HasSuffix(d.Description, big) || d.Description[0] != '3' {
		t.Fatalf("after compaction t7 reads back %.20q", d.Description)
	}
}

// Without a state folder the definitions stay in memory, as JSON.
func TestMemoryStore(t *testing.T) {
	c := New(search.NewLexical())
	if err := c.SetServer(context.Background(), "fs", []*mcp.Tool{{Name: "a", Description: "A", InputSchema: schemaOf("p")}}); err != nil {
		t.Fatal(err)
	}
	tl, _ := c.Lookup("fs__a")
	if d := tl.Def(); d.Description != "A" || !reflect.DeepEqual(d.InputSchema, schemaOf("p")) {
		t.Fatalf("Def = %+v", d)
	}
	c.RemoveServer("fs")
	if _, _, blobs := c.StoreSize(); blobs != 0 {
		t.Fatalf("%d blobs left after the server was removed", blobs)
	}
}

// The fast path for decoded schemas hashes exactly as the normalising
// path does, and typed values still normalise.
func TestDefinitionHashCanonical(t *testing.T) {
	native := map[string]any{"type": "object", "properties": map[string]any{"b": map[string]any{"type": "number", "default": 1.5}, "a": map[string]any{"enum": []any{"x", nil, true}}}}
	typed := map[string]any{"type": "object", "properties": map[string]any{"b": map[string]any{"type": "number", "default": 1.5}, "a": map[string]any{"enum": []any{"x", nil, true}}}}
	typed["required"] = []string{"a"}
	native["required"] = []any{"a"}
	d1 := &mcp.Tool{Name: "t", Description: "<d>", InputSchema: native, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}
	d2 := &mcp.Tool{Name: "t", Description: "<d>", InputSchema: typed, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}
	if DefinitionHash(d1) != DefinitionHash(d2) {
		t.Fatal("a []string and a []any schema hash differently")
	}
	raw := json.RawMessage(`{"required":["a"],"type":"object","properties":{"b":{"type":"number","default":1.5},"a":{"enum":["x",null,true]}}}`)
	if DefinitionHash(&mcp.Tool{Name: "t", Description: "<d>", InputSchema: raw, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}) != DefinitionHash(d1) {
		t.Fatal("a raw JSON schema with keys out of order hashes differently")
	}
}
