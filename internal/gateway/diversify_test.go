package gateway

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/embed"
	"github.com/toolgate/toolgate/internal/search"
)

// dropServer is a search filter that hides one server's tools.
type dropServer struct {
	server string
}

func (*dropServer) ID() string { return "dev.test/drop_server" }
func (d *dropServer) FilterSearch(_ context.Context, _ *extension.SearchRequest, rs []extension.SearchResult) ([]extension.SearchResult, error) {
	return slices.DeleteFunc(rs, func(r extension.SearchResult) bool { return r.Server == d.server }), nil
}

func diversityGateway(t *testing.T, exts ...extension.Extension) (*Gateway, *mcp.ClientSession) {
	t.Helper()
	ctx := context.Background()
	idx := search.NewHybrid(search.NewDense(embed.NewHashing(384), nil, nil))
	cfg := &config.Config{Servers: map[string]*config.Server{}, Filters: config.Filters{SimilarityThreshold: 0.1}}
	g, err := New(ctx, Options{Config: cfg, StateDir: t.TempDir(), Index: idx, Extensions: exts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	send := &mcp.Tool{Name: "send_email", Description: "Send an email message to a recipient with a subject and body.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"to": map[string]any{"type": "string"}}}}
	for _, s := range []string{"mail_a", "mail_b", "mail_c"} {
		if err := g.Catalog().SetServer(ctx, s, []*mcp.Tool{send}); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Catalog().SetServer(ctx, "files", []*mcp.Tool{
		{Name: "write_file", Description: "Write the report to a file.", InputSchema: map[string]any{"type": "object"}},
		{Name: "email_folder_list", Description: "List the email folders of a mailbox.", InputSchema: map[string]any{"type": "object"}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := g.WaitIndexed(ctx); err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	if _, err := g.Connect(ctx, st); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return g, cs
}

func searchOut(t *testing.T, cs *mcp.ClientSession, args map[string]any) (SearchOutput, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_tools", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError {
		t.Fatalf("search_tools failed: %s", text)
	}
	var out SearchOutput
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out, text
}

// Three servers offering the same send_email take one slot, naming the
// other two, so the second slot goes to another capability.
func TestSearchFoldsNearDuplicates(t *testing.T) {
	_, cs := diversityGateway(t)
	out, text := searchOut(t, cs, map[string]any{"query": "send an email message", "top_k": 2})
	if len(out.Tools) != 2 {
		t.Fatalf("want 2 entries, got %+v", out.Tools)
	}
	first := out.Tools[0]
	all := append([]string{first.Name}, first.Alternatives...)
	slices.Sort(all)
	if !slices.Equal(all, []string{"mail_a__send_email", "mail_b__send_email", "mail_c__send_email"}) {
		t.Fatalf("first entry %s with alternatives %v, want the three send_email tools in one entry", first.Name, first.Alternatives)
	}
	if strings.HasSuffix(out.Tools[1].Name, "send_email") {
		t.Fatalf("second slot went to another send_email: %s", out.Tools[1].Name)
	}
	if !strings.Contains(text, "also offered by: ") {
		t.Fatalf("the text does not name the alternatives:\n%s", text)
	}
}

// Search filters judge every member of an entry: a hidden server's tool
// neither leads nor appears as an alternative, and the next one leads.
func TestSearchFiltersJudgeAlternatives(t *testing.T) {
	_, cs := diversityGateway(t, &dropServer{server: "mail_a"})
	out, _ := searchOut(t, cs, map[string]any{"query": "send an email message", "top_k": 2})
	for _, f := range out.Tools {
		if strings.HasPrefix(f.Name, "mail_a__") || slices.Contains(f.Alternatives, "mail_a__send_email") {
			t.Fatalf("a filtered tool is shown: %+v", out.Tools)
		}
	}
	if first := out.Tools[0]; !strings.HasSuffix(first.Name, "send_email") || len(first.Alternatives) != 1 {
		t.Fatalf("want the two remaining send_email tools in one entry, got %+v", out.Tools)
	}
}

// queries returns the top k of each step, each tool once, labelled with
// the query it was found for; bad lists are refused with a clear error.
func TestSearchSeveralQueries(t *testing.T) {
	_, cs := diversityGateway(t)
	out, text := searchOut(t, cs, map[string]any{"queries": []string{"send an email message", "write the report to a file"}, "top_k": 1})
	if len(out.Tools) != 2 || !strings.HasSuffix(out.Tools[0].Name, "__send_email") || out.Tools[0].Query != "send an email message" ||
		out.Tools[1].Name != "files__write_file" || out.Tools[1].Query != "write the report to a file" {
		t.Fatalf("want send_email for the first step and write_file for the second, got %+v", out.Tools)
	}
	if !strings.Contains(text, `For "write the report to a file":`) {
		t.Fatalf("the text does not group by query:\n%s", text)
	}
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"queries": []string{"a", " "}}, "queries[1] is empty"},
		{map[string]any{"queries": []string{}}, `"query" is empty`},
		{map[string]any{"queries": strings.Split("a b c d e f g h i j k", " ")}, "11 queries, at most 10"},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_tools", Arguments: tc.args})
		if err != nil {
			t.Fatal(err)
		}
		if text := res.Content[0].(*mcp.TextContent).Text; !res.IsError || !strings.Contains(text, tc.want) {
			t.Errorf("%v: got %q, want an error saying %q", tc.args, text, tc.want)
		}
	}
}
