package search

import (
	"context"
	"slices"
	"testing"
)

func TestTokenize(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"read_file", []string{"read", "file"}},
		{"getFileInfo", []string{"get", "file", "info"}},
		{"HTTPServer", []string{"http", "server"}},
		{"Echoes back the input", []string{"echo", "back", "input"}},
		{"使用必应", []string{"使", "用", "必", "应"}},
		{"list-directory_with.sizes", []string{"list", "directori", "size"}},
	}
	for _, tt := range tests {
		if got := Tokenize(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Tokenize(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func testDocs() []Doc {
	return []Doc{
		{ID: "fs__read_file", Server: "fs", Name: "read_file", Description: "Read the complete contents of a file.", Params: []Param{{"path", "Path of the file"}}},
		{ID: "fs__write_file", Server: "fs", Name: "write_file", Description: "Create or overwrite a file with new content.", Params: []Param{{"path", ""}, {"content", ""}}},
		{ID: "ev__echo", Server: "ev", Name: "echo", Description: "Echoes back the input string", Params: []Param{{"message", "Message to echo"}}},
		{ID: "ev__get-sum", Server: "ev", Name: "get-sum", Description: "Returns the sum of two numbers", Params: []Param{{"a", "First number"}, {"b", "Second number"}}},
	}
}

func TestLexicalRanksAndScales(t *testing.T) {
	ctx := context.Background()
	l := NewLexical()
	docs := testDocs()
	l.Set(ctx, "fs", docs[:2])
	l.Set(ctx, "ev", docs[2:])
	res, _ := l.Search(ctx, "echo a message back", 10, 0)
	if len(res.Hits) == 0 || res.Hits[0].ID != "ev__echo" {
		t.Fatalf("hits = %v", res.Hits)
	}
	for _, h := range res.Hits {
		if h.Score < 0 || h.Score > 1 {
			t.Fatalf("score %v outside [0,1]", h.Score)
		}
	}
	res, _ = l.Search(ctx, "read_file", 10, 0)
	if res.Hits[0].ID != "fs__read_file" || res.Hits[0].Score < 0.99 {
		t.Fatalf("exact name: %v", res.Hits)
	}
	// The threshold drops weak matches; a query of unknown words finds nothing.
	res, _ = l.Search(ctx, "read", 10, 0.99)
	if len(res.Hits) != 1 {
		t.Fatalf("threshold: %v", res.Hits)
	}
	if res, _ = l.Search(ctx, "zebra quux", 10, 0); len(res.Hits) != 0 {
		t.Fatalf("unknown words: %v", res.Hits)
	}
}

func TestLexicalReplaceAndRemove(t *testing.T) {
	ctx := context.Background()
	l := NewLexical()
	docs := testDocs()
	l.Set(ctx, "fs", docs[:2])
	l.Set(ctx, "fs", docs[1:2]) // read_file is gone
	if res, _ := l.Search(ctx, "read contents", 10, 0); slices.ContainsFunc(res.Hits, func(h Hit) bool { return h.ID == "fs__read_file" }) {
		t.Fatalf("stale doc still found: %v", res.Hits)
	}
	l.Remove("fs")
	if res, _ := l.Search(ctx, "file", 10, 0); len(res.Hits) != 0 {
		t.Fatalf("removed server still found: %v", res.Hits)
	}
	if len(l.postings) != 0 || l.totalLen != 0 {
		t.Fatalf("index not empty after remove: %d postings, len %v", len(l.postings), l.totalLen)
	}
}

func TestDocText(t *testing.T) {
	d := testDocs()[3]
	if got, want := d.Text(), "ev__get-sum: Returns the sum of two numbers. Parameters: a, b"; got != want {
		t.Fatalf("Text() = %q", got)
	}
}

func FuzzTokenize(f *testing.F) {
	f.Add("getFileInfo read_file 使用必应 🙂 e\u0301")
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range Tokenize(s) {
			if tok == "" {
				t.Fatal("empty token")
			}
		}
	})
}

// TestExplainParts: Explain gives the lexical part of each matching
// document on Search's scale; a lexical index has no dense part.
func TestExplainParts(t *testing.T) {
	l := NewLexical()
	ctx := context.Background()
	if err := l.Set(ctx, "s", []Doc{{ID: "s__echo", Name: "echo", Description: "Echoes a message"}, {ID: "s__add", Name: "add", Description: "Adds numbers"}}); err != nil {
		t.Fatal(err)
	}
	parts, err := l.Explain(ctx, "echo message")
	if err != nil {
		t.Fatal(err)
	}
	res, _ := l.Search(ctx, "echo message", 10, 0)
	if len(parts) != 1 || len(res.Hits) != 1 || parts["s__echo"].Lexical != res.Hits[0].Score || parts["s__echo"].Dense != nil {
		t.Errorf("parts %+v, search %+v", parts, res.Hits)
	}
}
