package search

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// byServer groups testDocs by server, in order.
func docsByServer() (servers []string, docs map[string][]Doc) {
	docs = map[string][]Doc{}
	for _, d := range testDocs() {
		if _, ok := docs[d.Server]; !ok {
			servers = append(servers, d.Server)
		}
		docs[d.Server] = append(docs[d.Server], d)
	}
	return servers, docs
}

func searchAll(t *testing.T, l *Lexical, queries []string) [][]Hit {
	t.Helper()
	var out [][]Hit
	for _, q := range queries {
		r, err := l.Search(context.Background(), q, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.Hits)
	}
	return out
}

// An index started from the cache file ranks and scores exactly as one
// that analysed every document, and uses the file: a server whose entry
// is valid is not analysed again.
func TestLexicalCacheWarmMatchesCold(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), LexicalCacheFile)
	servers, docs := docsByServer()
	queries := []string{"read file", "echo message", "sum of two numbers", "path content", "nothing matches zzz"}

	cold := NewLexical()
	cold.Persist(path)
	for _, s := range servers {
		if err := cold.Set(ctx, s, docs[s]); err != nil {
			t.Fatal(err)
		}
	}
	want := searchAll(t, cold, queries)
	if err := cold.Close(); err != nil {
		t.Fatal(err)
	}

	warm := NewLexical()
	warm.Persist(path)
	for _, s := range servers {
		hash := docsHash(docs[s])
		if _, ok := warm.cache.take(s, docs[s], hash); !ok {
			t.Fatalf("server %s: the cache file has no valid entry", s)
		}
	}
	// take forgot the entries: open again for the real comparison.
	warm = NewLexical()
	warm.Persist(path)
	for _, s := range servers {
		if err := warm.Set(ctx, s, docs[s]); err != nil {
			t.Fatal(err)
		}
	}
	if got := searchAll(t, warm, queries); !reflect.DeepEqual(got, want) {
		t.Errorf("warm search\n%v\nwant (cold)\n%v", got, want)
	}
	if warm.totalLen != cold.totalLen || !slices.Equal(warm.lens, cold.lens) || !slices.Equal(warm.ids, cold.ids) {
		t.Errorf("warm index differs: lens %v ids %v total %v; cold %v %v %v", warm.lens, warm.ids, warm.totalLen, cold.lens, cold.ids, cold.totalLen)
	}
}

// A server whose tools changed since the file was written is analysed
// afresh: its new words are found, its old ones are not.
func TestLexicalCacheStaleEntryRebuilt(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), LexicalCacheFile)
	servers, docs := docsByServer()
	l := NewLexical()
	l.Persist(path)
	for _, s := range servers {
		if err := l.Set(ctx, s, docs[s]); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	changed := slices.Clone(docs["ev"])
	changed[0].Description = "Repeats the given zebra verbatim"
	l = NewLexical()
	l.Persist(path)
	if err := l.Set(ctx, "ev", changed); err != nil {
		t.Fatal(err)
	}
	if r, _ := l.Search(ctx, "zebra", 5, 0); len(r.Hits) != 1 || r.Hits[0].ID != "ev__echo" {
		t.Errorf("new word: hits %v, want ev__echo", r.Hits)
	}
	if r, _ := l.Search(ctx, "string", 5, 0); len(r.Hits) != 0 {
		t.Errorf("a word only the old description had matches: %v", r.Hits)
	}
}

// A damaged or foreign file is ignored: the index analyses the documents
// and Close replaces the file with a good one.
func TestLexicalCacheDamagedFileIgnored(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), LexicalCacheFile)
	if err := os.WriteFile(path, []byte("not a cache file"), 0o600); err != nil {
		t.Fatal(err)
	}
	servers, docs := docsByServer()
	l := NewLexical()
	l.Persist(path)
	for _, s := range servers {
		if err := l.Set(ctx, s, docs[s]); err != nil {
			t.Fatal(err)
		}
	}
	if r, _ := l.Search(ctx, "echo", 5, 0); len(r.Hits) == 0 || r.Hits[0].ID != "ev__echo" {
		t.Fatalf("hits %v, want ev__echo first", r.Hits)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = NewLexical()
	l.Persist(path)
	if _, ok := l.cache.take("ev", docs["ev"], docsHash(docs["ev"])); !ok {
		t.Error("Close did not replace the damaged file with a usable one")
	}
}
