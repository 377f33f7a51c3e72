package catalog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/search"
)

func manyTools(n int, prefix string) []*mcp.Tool {
	out := make([]*mcp.Tool, n)
	for i := range out {
		out[i] = &mcp.Tool{Name: fmt.Sprintf("%s_%d", prefix, i), Description: "Tool number " + fmt.Sprint(i)}
	}
	return out
}

// A list over the per-server limit is refused as a whole, naming the
// server, the count, the key and the limit; the server keeps what it had.
func TestUpdatePerServerLimit(t *testing.T) {
	ctx := context.Background()
	c := New(search.NewLexical())
	c.SetLimits(Limits{PerServer: 5})
	if _, err := c.Update(ctx, "big", manyTools(5, "a")); err != nil {
		t.Fatalf("5 tools at a limit of 5: %v", err)
	}
	_, err := c.Update(ctx, "big", manyTools(6, "b"))
	var tm *TooManyError
	if !errors.As(err, &tm) {
		t.Fatalf("6 tools at a limit of 5: err = %v, want a *TooManyError", err)
	}
	for _, want := range []string{`"big"`, "6 tools", KeyPerServer, "(5)", "none of its tools were added"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if got := c.ServerTools("big"); len(got) != 5 || got[0].Name != "a_0" {
		t.Fatalf("after the refused list the server has %d tools (%v), want its 5 earlier ones", len(got), got)
	}
}

// The total limit counts every server's tools; a server re-listing
// replaces its own count rather than adding to it.
func TestUpdateTotalLimit(t *testing.T) {
	ctx := context.Background()
	c := New(search.NewLexical())
	c.SetLimits(Limits{PerServer: 10, Total: 12})
	if _, err := c.Update(ctx, "one", manyTools(8, "x")); err != nil {
		t.Fatal(err)
	}
	// Re-listing the same server with 10 makes 10 in all, not 18.
	if _, err := c.Update(ctx, "one", manyTools(10, "x")); err != nil {
		t.Fatalf("re-list within the total: %v", err)
	}
	_, err := c.Update(ctx, "two", manyTools(3, "y"))
	var tm *TooManyError
	if !errors.As(err, &tm) || tm.Key != KeyTotal || tm.Total != 13 || tm.Limit != 12 {
		t.Fatalf("err = %#v, want a *TooManyError for %s with total 13 and limit 12", err, KeyTotal)
	}
	for _, want := range []string{`"two"`, "3 tools", "13 tools in all", KeyTotal, "(12)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if c.HasServer("two") || c.Len() != 10 {
		t.Fatalf("refused server added tools: len %d", c.Len())
	}
	m, _, _ := c.Search(ctx, "tool number", 50, 0)
	for _, x := range m {
		if x.Server == "two" {
			t.Fatalf("refused server's tool %s is searchable", x.Qualified)
		}
	}
}

// Oversized definitions are left out one by one with the reason; the
// server's other tools stay. A name longer than the limit is never quoted
// in full, whatever the limit (a short limit once sliced past the name).
func TestAdmitSizeLimits(t *testing.T) {
	long := strings.Repeat("n", 30)
	defs := []*mcp.Tool{
		{Name: "ok", Description: "fine", InputSchema: map[string]any{"type": "object"}},
		{Name: "wordy", Description: strings.Repeat("d", 101)},
		{Name: "titled", Title: strings.Repeat("t", 101)},
		{Name: "schema", InputSchema: map[string]any{"type": "object", "description": strings.Repeat("s", 200)}},
		{Name: "outschema", OutputSchema: map[string]any{"type": "object", "description": strings.Repeat("s", 200)}},
		{Name: "meta", Meta: mcp.Meta{"x": strings.Repeat("m", 200)}},
		{Name: long},
		{Name: ""},
		{Name: "ok"},
	}
	l := Limits{NameBytes: 20, DescriptionBytes: 100, SchemaBytes: 150}
	kept, rejected, err := Admit("srv", defs, l)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || kept[0].Name != "ok" {
		t.Fatalf("kept %v, want only ok", kept)
	}
	want := map[string]string{
		"wordy":     KeyDescriptionBytes,
		"titled":    KeyDescriptionBytes,
		"schema":    KeySchemaBytes,
		"outschema": KeySchemaBytes,
		"meta":      KeySchemaBytes,
		"":          "catalog",
	}
	got := map[string]Rejected{}
	for _, r := range rejected {
		if strings.Contains(r.Tool, long) {
			t.Errorf("the over-long name is quoted in full: %q", r.Tool)
		}
		if strings.HasPrefix(r.Tool, "nnnn") {
			if r.Rule != KeyNameBytes || !strings.Contains(r.Reason, "30 bytes") || !strings.Contains(r.Reason, "(20)") {
				t.Errorf("long name rejected as %+v", r)
			}
			continue
		}
		if r.Tool == "ok" {
			if !strings.Contains(r.Reason, "duplicate") {
				t.Errorf("second ok rejected as %+v, want duplicate", r)
			}
			continue
		}
		got[r.Tool] = r
	}
	for tool, rule := range want {
		r, ok := got[tool]
		if !ok || r.Rule != rule {
			t.Errorf("tool %q: rejected as %+v, want rule %s", tool, r, rule)
		}
	}
	if r := got["wordy"]; !strings.Contains(r.Reason, "description is 101 bytes") || !strings.Contains(r.Reason, "(100)") {
		t.Errorf("wordy reason %q does not give the size and the limit", r.Reason)
	}
	if len(rejected) != 8 {
		t.Errorf("%d rejected, want 8: %+v", len(rejected), rejected)
	}
}

// Zero limits mean no limit.
func TestAdmitNoLimits(t *testing.T) {
	defs := append(manyTools(50, "t"), &mcp.Tool{Name: strings.Repeat("n", 500), Description: strings.Repeat("d", 1<<20)})
	kept, rejected, err := Admit("srv", defs, Limits{})
	if err != nil || len(kept) != 51 || len(rejected) != 0 {
		t.Fatalf("kept %d, rejected %v, err %v", len(kept), rejected, err)
	}
}

// Update applies the size limits: an oversized tool is not searchable, and
// the error names it.
func TestUpdateSkipsOversized(t *testing.T) {
	ctx := context.Background()
	c := New(search.NewLexical())
	c.SetLimits(Limits{DescriptionBytes: 64})
	_, err := c.Update(ctx, "s", []*mcp.Tool{
		{Name: "small", Description: "Read the weather"},
		{Name: "huge", Description: "Read the weather " + strings.Repeat("again and again ", 10)},
	})
	if err == nil || !strings.Contains(err.Error(), `tool "huge"`) || !strings.Contains(err.Error(), KeyDescriptionBytes) {
		t.Fatalf("err = %v, want one naming huge and %s", err, KeyDescriptionBytes)
	}
	if _, ok := c.Lookup("s__huge"); ok {
		t.Fatal("oversized tool catalogued")
	}
	if _, ok := c.Lookup("s__small"); !ok {
		t.Fatal("the server's other tool was dropped")
	}
}

// Update measures each input schema once and stores it with the right
// tool: with tools rejected before and between the kept ones, every kept
// tool gets its own schema and hash, an oversized schema is refused by its
// size, and one that cannot be encoded is refused saying so.
func TestUpdateSchemaSizesPairWithTools(t *testing.T) {
	ctx := context.Background()
	c := New(search.NewLexical())
	c.SetLimits(Limits{SchemaBytes: 150})
	schemaOf := func(p string) map[string]any {
		return map[string]any{"type": "object", "properties": map[string]any{p: map[string]any{"type": "string"}}}
	}
	defs := []*mcp.Tool{
		{Name: "big", InputSchema: map[string]any{"type": "object", "description": strings.Repeat("s", 200)}},
		{Name: "first", InputSchema: schemaOf("alpha")},
		{Name: ""},
		{Name: "broken", InputSchema: map[string]any{"type": "object", "default": math.Inf(1)}},
		{Name: "second", InputSchema: schemaOf("beta")},
		{Name: "first", InputSchema: schemaOf("gamma")},
		{Name: "third", InputSchema: schemaOf("delta")},
	}
	_, err := c.Update(ctx, "srv", defs)
	if err == nil || !strings.Contains(err.Error(), `tool "big" (its input schema is`) || !strings.Contains(err.Error(), `tool "broken" (its input schema cannot be encoded as JSON)`) {
		t.Fatalf("Update error %v, want big refused by size and broken as unencodable", err)
	}
	for name, prop := range map[string]string{"first": "alpha", "second": "beta", "third": "delta"} {
		tool, ok := c.Lookup(Qualify("srv", name))
		if !ok {
			t.Fatalf("%s not kept", name)
		}
		want := &mcp.Tool{Name: name, InputSchema: schemaOf(prop)}
		if got := tool.Def(); !strings.Contains(string(extension.CanonicalJSON(got.InputSchema)), `"`+prop+`"`) {
			t.Errorf("%s stored with schema %v, want the one with %s", name, got.InputSchema, prop)
		}
		if tool.Hash != DefinitionHash(want) {
			t.Errorf("%s: hash %s, want %s", name, tool.Hash, DefinitionHash(want))
		}
	}
	if c.Len() != 3 {
		t.Errorf("catalogue holds %d tools, want 3", c.Len())
	}
}
