// Command embedstat measures the local embedder: load time, resident memory,
// single-query latency and batch throughput on a JSONL tool corpus.
//
//	go run ./scripts/model/embedstat [-tools FILE] [-n 200]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/embed"
)

func main() {
	tools := flag.String("tools", "/work/shared/bench/retrieval/tools.jsonl", "JSONL tool corpus (server, name, description, inputSchema)")
	n := flag.Int("n", 200, "single-query iterations")
	flag.Parse()
	dir, err := embed.DefaultDir()
	if err != nil {
		log.Fatal(err)
	}
	t0 := time.Now()
	m, err := embed.Load(dir)
	if err != nil {
		log.Fatal(err)
	}
	load := time.Since(t0)
	runtime.GC()
	fmt.Printf("model      %s (%d dims, GOMAXPROCS=%d)\n", m.ModelID(), m.Dim(), runtime.GOMAXPROCS(0))
	fmt.Printf("load       %v   RSS after load %s\n", load.Round(time.Millisecond), rss())

	ctx := context.Background()
	q := []string{"create a github issue for a failing build"}
	m.Embed(ctx, q)
	lat := make([]time.Duration, *n)
	for i := range lat {
		t := time.Now()
		if _, err := m.Embed(ctx, q); err != nil {
			log.Fatal(err)
		}
		lat[i] = time.Since(t)
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	fmt.Printf("query      p50 %v  p90 %v  (%d tokens)\n", lat[len(lat)/2].Round(10*time.Microsecond),
		lat[len(lat)*9/10].Round(10*time.Microsecond), len(m.Tokenizer().Encode(q[0], embed.MaxTokens)))

	texts := readTools(*tools)
	if len(texts) == 0 {
		return
	}
	tokens := 0
	for _, t := range texts {
		tokens += len(m.Tokenizer().Encode(t, embed.MaxTokens))
	}
	t1 := time.Now()
	if _, err := m.Embed(ctx, texts); err != nil {
		log.Fatal(err)
	}
	d := time.Since(t1)
	fmt.Printf("batch      %d descriptions (%.1f tokens avg) in %v: %.1f descriptions/s, %.0f tokens/s\n",
		len(texts), float64(tokens)/float64(len(texts)), d.Round(time.Millisecond),
		float64(len(texts))/d.Seconds(), float64(tokens)/d.Seconds())
	fmt.Printf("RSS        %s after batch\n", rss())
}

func readTools(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		log.Printf("no tool corpus: %v", err)
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var t struct {
			Server, Name, Description string
			InputSchema               struct {
				Properties map[string]struct{ Description string } `json:"properties"`
			} `json:"inputSchema"`
		}
		if json.Unmarshal(sc.Bytes(), &t) != nil {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s__%s: %s", t.Server, t.Name, strings.TrimRight(t.Description, ". "))
		names := make([]string, 0, len(t.InputSchema.Properties))
		for k := range t.InputSchema.Properties {
			names = append(names, k)
		}
		sort.Strings(names)
		for i, k := range names {
			sep := ", "
			if i == 0 {
				sep = ". Parameters: "
			}
			fmt.Fprintf(&b, "%s%s: %s", sep, k, t.InputSchema.Properties[k].Description)
		}
		out = append(out, b.String())
	}
	return out
}

func rss() string {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "n/a"
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:"))
		}
	}
	return "n/a"
}
