package embed

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
)

// benchToolsFile holds realistic MCP tool definitions, in shared/ beside
// the checkout (never copied into it). Override with $TOOLGATE_BENCH_TOOLS.
const benchToolsFile = "../../../shared/bench/retrieval/tools.jsonl"

// toolTexts returns the texts the gateway embeds per tool:
// "{server}__{tool}: {description}. Parameters: {param}: {desc}, ...".
func toolTexts(tb testing.TB) []string {
	tb.Helper()
	path := os.Getenv("TOOLGATE_BENCH_TOOLS")
	if path == "" {
		path = benchToolsFile
	}
	f, err := os.Open(path)
	if err != nil {
		tb.Logf("no tool corpus (%v); using synthetic descriptions", err)
		return syntheticTexts(64)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var t struct {
			Server      string `json:"server"`
			Name        string `json:"name"`
			Description string `json:"description"`
			InputSchema struct {
				Properties map[string]struct {
					Description string `json:"description"`
				} `json:"properties"`
			} `json:"inputSchema"`
		}
		if json.Unmarshal(sc.Bytes(), &t) != nil {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s__%s: %s", t.Server, t.Name, strings.TrimRight(t.Description, ". "))
		names := make([]string, 0, len(t.InputSchema.Properties))
		for n := range t.InputSchema.Properties {
			names = append(names, n)
		}
		sort.Strings(names)
		for i, n := range names {
			if i == 0 {
				b.WriteString(". Parameters: ")
			} else {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s: %s", n, t.InputSchema.Properties[n].Description)
		}
		out = append(out, b.String())
	}
	if len(out) == 0 {
		return syntheticTexts(64)
	}
	return out
}

func syntheticTexts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("server%d__tool_%d: Retrieve the current status of deployment %d in the selected cloud project and report errors. Parameters: project: Project identifier, deployment: Deployment name, verbose: Include detailed logs", i, i, i)
	}
	return out
}

func BenchmarkEmbedQuery(b *testing.B) {
	m := loadTestModel(b)
	ctx := context.Background()
	q := []string{"create a github issue for a failing build"}
	if _, err := m.Embed(ctx, q); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := m.Embed(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/query")
}

func BenchmarkEmbedBatch(b *testing.B) {
	m := loadTestModel(b)
	all := toolTexts(b)
	// 64 descriptions spread over the corpus.
	batch := make([]string, 0, 64)
	for i := 0; i < 64; i++ {
		batch = append(batch, all[i*len(all)/64])
	}
	tokens := 0
	for _, t := range batch {
		tokens += len(m.Tokenizer().Encode(t, MaxTokens))
	}
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := m.Embed(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(len(batch)*b.N)/sec, "descriptions/s")
	b.ReportMetric(float64(tokens)/float64(len(batch)), "tokens/desc")
}

func BenchmarkEmbedCorpus(b *testing.B) {
	m := loadTestModel(b)
	all := toolTexts(b)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := m.Embed(ctx, all); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(all)*b.N)/b.Elapsed().Seconds(), "descriptions/s")
}

func BenchmarkLoad(b *testing.B) {
	dir := modelDir(b)
	for range b.N {
		if _, err := Load(dir); err != nil {
			b.Fatal(err)
		}
	}
}
