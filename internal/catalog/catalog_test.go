package catalog

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/search"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		in, server, tool string
		ok               bool
	}{
		{"fs__read_file", "fs", "read_file", true},
		{"fs__a__b", "fs", "a__b", true},
		{"__x", "", "", false},
		{"fs__", "", "", false},
		{"plain", "", "", false},
	}
	for _, tt := range tests {
		s, tl, ok := Split(tt.in)
		if s != tt.server || tl != tt.tool || ok != tt.ok {
			t.Errorf("Split(%q) = %q %q %v", tt.in, s, tl, ok)
		}
	}
}

func TestCatalogSetReplaceSearch(t *testing.T) {
	ctx := context.Background()
	c := New(search.NewLexical())
	schema := map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string", "description": "where"}}}
	err := c.SetServer(ctx, "fs", []*mcp.Tool{
		{Name: "read_file", Description: "Read a file", InputSchema: schema},
		{Name: "read_file", Description: "dup"},
		{Name: ""},
	})
	if err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("want an error naming the duplicate, got %v", err)
	}
	if c.Len() != 1 {
		t.Fatalf("Len = %d", c.Len())
	}
	tl, ok := c.Lookup("fs__read_file")
	if !ok || tl.Def().Description != "Read a file" {
		t.Fatalf("Lookup = %+v", tl)
	}
	if d := DocOf(tl); len(d.Params) != 1 || d.Params[0].Description != "where" {
		t.Fatalf("DocOf = %+v", d)
	}
	m, _, _ := c.Search(ctx, "read a file", 5, 0)
	if len(m) != 1 || m[0].Qualified != "fs__read_file" {
		t.Fatalf("Search = %+v", m)
	}
	c.SetServer(ctx, "fs", []*mcp.Tool{{Name: "write_file", Description: "Write a file"}})
	if _, ok := c.Lookup("fs__read_file"); ok {
		t.Fatal("replaced tool still present")
	}
	c.RemoveServer("fs")
	if c.Len() != 0 || c.HasServer("fs") {
		t.Fatal("RemoveServer left tools")
	}
}
