// Command retrieval measures tool-search quality and speed: it loads a
// catalogue in the tools.jsonl format into the gateway's real index (the
// same catalogue, index and Search function search_tools uses), runs the
// labelled queries, and prints Recall@1/3/5/10 over relevant_groups and MRR
// per source and overall, with search latency and index build time.
//
//	go run ./bench/retrieval [-mode hybrid|lexical|dense|all] [-distractors N] [-state-dir DIR]
//
// With -state-dir the embedding cache is kept between runs: the first run
// measures indexing, later runs measure a restart with every vector cached.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/search"
)

type toolRow struct {
	Server      string         `json:"server"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
}

type queryRow struct {
	ID             string     `json:"id"`
	Query          string     `json:"query"`
	RelevantGroups [][]string `json:"relevant_groups"`
	Source         string     `json:"source"`
}

func main() {
	data := flag.String("data", "../shared/bench/retrieval", "folder with tools.jsonl and queries_dev.jsonl")
	queries := flag.String("queries", "queries_dev.jsonl", "query file in -data")
	mode := flag.String("mode", "all", "hybrid, lexical, dense or all")
	distractors := flag.Int("distractors", 0, "synthetic distractor tools to add")
	threshold := flag.Float64("threshold", config.DefaultSimilarityThreshold, "similarity threshold, as filters.similarity_threshold")
	weight := flag.Float64("weight", search.DefaultDenseWeight, "dense weight in hybrid mode")
	stateDir := flag.String("state-dir", "", "embedding cache folder (default: a temporary folder per run; set it to measure a warm restart)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of index build and searches to this file")
	memProfile := flag.String("memprofile", "", "write a heap profile after the last search to this file")
	flag.StringVar(&showMisses, "misses", "", "print the queries of this source (or \"all\") that miss a relevant group in the top 5, with the top 5")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	memProfilePath = *memProfile

	tools, err := readJSONL[toolRow](filepath.Join(*data, "tools.jsonl"))
	if err != nil {
		log.Fatal(err)
	}
	qs, err := readJSONL[queryRow](filepath.Join(*data, *queries))
	if err != nil {
		log.Fatal(err)
	}
	if *distractors > 0 {
		tools = append(tools, makeDistractors(tools, *distractors)...)
	}
	modes := []string{*mode}
	if *mode == "all" {
		modes = []string{config.SearchLexical, config.SearchDense, config.SearchHybrid}
	}
	fmt.Printf("catalogue: %d tools (%d distractors), %d queries, threshold %.2f\n\n", len(tools), *distractors, len(qs), *threshold)
	for _, m := range modes {
		if err := runMode(m, tools, qs, *threshold, *weight, *stateDir); err != nil {
			log.Print(err)
			return
		}
	}
}

var memProfilePath, showMisses string

func runMode(mode string, tools []toolRow, qs []queryRow, threshold, weight float64, stateDir string) error {
	ctx := context.Background()
	if stateDir == "" {
		dir, err := os.MkdirTemp("", "toolgate-retrieval-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		stateDir = dir
	}
	scfg := config.Search{Mode: mode, DenseWeight: &weight}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	idx, err := search.Open(scfg, stateDir, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	load := time.Since(t0)
	cfg := &config.Config{Servers: map[string]*config.Server{}, Filters: config.Filters{SimilarityThreshold: threshold}, Search: scfg}
	g, err := gateway.New(ctx, gateway.Options{Config: cfg, StateDir: stateDir, Index: idx})
	if err != nil {
		return err
	}
	defer g.Close()

	byServer := map[string][]*mcp.Tool{}
	var order []string
	for _, t := range tools {
		if _, ok := byServer[t.Server]; !ok {
			order = append(order, t.Server)
		}
		byServer[t.Server] = append(byServer[t.Server], &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	t1 := time.Now()
	for _, s := range order {
		if err := g.Catalog().SetServer(ctx, s, byServer[s]); err != nil {
			fmt.Fprintln(os.Stderr, "warning:", err)
		}
	}
	if err := g.WaitIndexed(ctx); err != nil {
		return err
	}
	build := time.Since(t1)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)

	type agg struct {
		n   int
		r   [4]float64
		mrr float64
		lat []time.Duration
	}
	ks := [4]int{1, 3, 5, 10}
	per := map[string]*agg{}
	all := &agg{}
	for _, q := range qs {
		ts := time.Now()
		res, _, err := g.Search(ctx, &extension.SearchRequest{Query: q.Query, TopK: 10})
		lat := time.Since(ts)
		if err != nil {
			return err
		}
		names := make([]string, len(res))
		for i, r := range res {
			names[i] = r.Name
		}
		a := per[q.Source]
		if a == nil {
			a = &agg{}
			per[q.Source] = a
		}
		if showMisses != "" && (showMisses == "all" || showMisses == q.Source) && groupRecall(q.RelevantGroups, names, 5) < 1 {
			printMiss(q, res)
		}
		for _, x := range []*agg{a, all} {
			x.n++
			x.lat = append(x.lat, lat)
			for i, k := range ks {
				x.r[i] += groupRecall(q.RelevantGroups, names, k)
			}
			x.mrr += reciprocalRank(q.RelevantGroups, names)
		}
	}
	if memProfilePath != "" {
		f, err := os.Create(memProfilePath)
		if err != nil {
			return err
		}
		runtime.GC()
		pprof.WriteHeapProfile(f)
		f.Close()
	}
	rss, peak := procMem()
	fmt.Printf("== %s  (model load %s, index build %s for %d tools = %.0f tools/s, heap +%d MB, RSS %d MB, peak %d MB)\n", mode,
		load.Round(time.Millisecond), build.Round(time.Millisecond), len(tools), float64(len(tools))/build.Seconds(),
		(int64(after.HeapAlloc)-int64(before.HeapAlloc))>>20, rss, peak)
	fmt.Printf("%-14s %5s %6s %6s %6s %6s %6s %9s %9s\n", "source", "n", "R@1", "R@3", "R@5", "R@10", "MRR", "p50", "p99")
	sources := make([]string, 0, len(per))
	for s := range per {
		sources = append(sources, s)
	}
	sort.Strings(sources)
	row := func(name string, a *agg) {
		slices.Sort(a.lat)
		q := func(p float64) time.Duration { return a.lat[min(len(a.lat)-1, int(p*float64(len(a.lat))))] }
		n := float64(a.n)
		fmt.Printf("%-14s %5d %6.3f %6.3f %6.3f %6.3f %6.3f %9s %9s\n", name, a.n, a.r[0]/n, a.r[1]/n, a.r[2]/n, a.r[3]/n, a.mrr/n,
			q(0.5).Round(10*time.Microsecond), q(0.99).Round(10*time.Microsecond))
	}
	for _, s := range sources {
		row(s, per[s])
	}
	row("overall", all)
	fmt.Println()
	return nil
}

func printMiss(q queryRow, res []extension.SearchResult) {
	fmt.Printf("MISS %s: %q\n", q.Source, q.Query)
	for i, r := range res[:min(5, len(res))] {
		fmt.Printf("   %d. %-55s %.3f\n", i+1, r.Name, r.Score)
	}
	for _, g := range q.RelevantGroups {
		rank := -1
		for i, r := range res {
			if slices.Contains(g, r.Name) {
				rank = i + 1
				break
			}
		}
		if rank < 0 || rank > 5 {
			fmt.Printf("   want %v (rank %d)\n", g, rank)
		}
	}
}

// procMem returns the process's resident and peak resident memory in MB
// (Linux; zero elsewhere).
func procMem() (rss, peak int) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		var kb int
		if _, err := fmt.Sscanf(line, "VmRSS: %d kB", &kb); err == nil {
			rss = kb >> 10
		} else if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kb); err == nil {
			peak = kb >> 10
		}
	}
	return rss, peak
}

// groupRecall is the share of relevant groups with a member in the top k.
func groupRecall(groups [][]string, ranked []string, k int) float64 {
	if len(groups) == 0 {
		return 0
	}
	top := ranked[:min(k, len(ranked))]
	found := 0
	for _, g := range groups {
		if slices.ContainsFunc(g, func(n string) bool { return slices.Contains(top, n) }) {
			found++
		}
	}
	return float64(found) / float64(len(groups))
}

func reciprocalRank(groups [][]string, ranked []string) float64 {
	for i, n := range ranked {
		for _, g := range groups {
			if slices.Contains(g, n) {
				return 1 / float64(i+1)
			}
		}
	}
	return 0
}

func readJSONL[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%v (run from the repository root; the data lives in ../shared/bench)", err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("%s line %d: %v", path, n, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// makeDistractors generates n plausible tools from the catalogue's own
// vocabulary with a fixed seed: names from verb and noun pairs seen in real
// tool names, descriptions from a word-bigram chain over real descriptions,
// parameters borrowed from real tools. The server name is drawn per tool
// ("synth-<name part>-<i/20>"), so most distractors land in a server of
// their own: 20,000 distractors make 18,127 servers, 16,743 with one tool.
// Keep that in mind before measuring server-level ranking signals with it.
func makeDistractors(tools []toolRow, n int) []toolRow {
	rng := rand.New(rand.NewPCG(42, 7))
	var nameParts []string
	next := map[string][]string{}
	var starts []string
	for _, t := range tools {
		for _, p := range strings.FieldsFunc(t.Name, func(r rune) bool { return r == '_' || r == '-' }) {
			nameParts = append(nameParts, strings.ToLower(p))
		}
		words := strings.Fields(t.Description)
		if len(words) == 0 {
			continue
		}
		starts = append(starts, words[0])
		for i := 0; i+1 < len(words); i++ {
			next[words[i]] = append(next[words[i]], words[i+1])
		}
	}
	out := make([]toolRow, 0, n)
	for i := range n {
		server := fmt.Sprintf("synth-%s-%d", nameParts[rng.IntN(len(nameParts))], i/20)
		name := nameParts[rng.IntN(len(nameParts))] + "_" + nameParts[rng.IntN(len(nameParts))] + "_" + fmt.Sprint(i%20)
		w := starts[rng.IntN(len(starts))]
		desc := []string{w}
		for len(desc) < 8+rng.IntN(20) {
			cands := next[w]
			if len(cands) == 0 {
				break
			}
			w = cands[rng.IntN(len(cands))]
			desc = append(desc, w)
		}
		src := tools[rng.IntN(len(tools))]
		out = append(out, toolRow{Server: server, Name: name, Description: strings.Join(desc, " "), InputSchema: src.InputSchema})
	}
	return out
}
