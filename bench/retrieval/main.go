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
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/embed"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/model"
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
	mode := flag.String("mode", "", "hybrid, lexical, dense or all (default: all, or hybrid with -distractors)")
	distractors := flag.Int("distractors", 0, "distractor tools to add (up to 100000); prints the loss against the real catalogue alone")
	vectors := flag.String("distractor-vectors", "synthetic", "how distractors get their vectors: synthetic (made from the real tools' vectors, written to the embedding cache before the run) or model (embedded, slow: about 100 tools/s on 2 cores; cached in -state-dir)")
	perServer := flag.Int("per-server", 200, "distractor tools per distractor server")
	dupShare := flag.Float64("dup-share", 0.1, "share of distractors that are near-duplicates of a real tool on another server")
	restart := flag.Bool("restart", true, "with -distractors, also measure a warm restart (every vector cached)")
	threshold := flag.Float64("threshold", config.DefaultSimilarityThreshold, "similarity threshold, as filters.similarity_threshold")
	weight := flag.Float64("weight", search.DefaultDenseWeight, "dense weight in hybrid mode")
	stateDir := flag.String("state-dir", "", "state folder with the embedding cache (default: a temporary folder per run; set it to keep vectors between runs)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of index build and searches to this file")
	memProfile := flag.String("memprofile", "", "write a heap profile after the last search to this file")
	flag.StringVar(&restartProfilePath, "restart-cpuprofile", "", "write a CPU profile of the warm restart alone to this file (without -cpuprofile)")
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
	if *distractors < 0 || *distractors > 100000 {
		log.Fatalf("-distractors %d: want 0 to 100000", *distractors)
	}
	if *vectors != "synthetic" && *vectors != "model" {
		log.Fatalf("-distractor-vectors %q: want synthetic or model", *vectors)
	}

	tools, err := readJSONL[toolRow](filepath.Join(*data, "tools.jsonl"))
	if err != nil {
		log.Fatal(err)
	}
	qs, err := readJSONL[queryRow](filepath.Join(*data, *queries))
	if err != nil {
		log.Fatal(err)
	}
	modes := []string{*mode}
	switch {
	case *mode == "all" || *mode == "" && *distractors == 0:
		modes = []string{config.SearchLexical, config.SearchDense, config.SearchHybrid}
	case *mode == "":
		modes = []string{config.SearchHybrid}
	}
	run := runConfig{tools: tools, qs: qs, threshold: *threshold, weight: *weight, stateDir: *stateDir, distractors: *distractors,
		synthetic: *vectors == "synthetic", restart: *restart}
	if *distractors > 0 {
		run.gen = newDistractorGen(tools, *perServer, *dupShare)
	}
	fmt.Printf("catalogue: %d real tools + %d distractors (%d per server, %.0f%% near-duplicates, %s vectors), %d queries, threshold %.2f\n\n",
		len(tools), *distractors, *perServer, 100**dupShare, *vectors, len(qs), *threshold)
	for _, m := range modes {
		run.mode = m
		if err := run.run(); err != nil {
			log.Print(err)
			return
		}
		if run.out.gateway != nil {
			run.out.gateway.Close()
		}
	}
}

var memProfilePath, showMisses string

type runConfig struct {
	mode               string
	tools              []toolRow
	qs                 []queryRow
	threshold, weight  float64
	stateDir           string
	distractors        int
	gen                *distractorGen
	synthetic, restart bool
	// emb, when set, replaces the installed model (the smoke test uses
	// the hashing embedder: the same index, none of the model's cost).
	emb embed.Embedder
	// out collects what a run measured, for the smoke test.
	out outcome
}

// outcome is what a run found.
type outcome struct {
	base, with, warm evaluation
	tools            int // in the catalogue with distractors
	warnings         int
	gateway          *gateway.Gateway // the warm one, open until the caller closes it
}

func (rc *runConfig) warn(err error) {
	rc.out.warnings++
	fmt.Fprintln(os.Stderr, "warning:", err)
}

type agg struct {
	n   int
	r   [4]float64
	mrr float64
	lat []time.Duration
}

var ks = [4]int{1, 3, 5, 10}

func (a *agg) recall(i int) float64 { return a.r[i] / float64(a.n) }
func (a *agg) meanRR() float64      { return a.mrr / float64(a.n) }
func (a *agg) pct(p float64) time.Duration {
	slices.Sort(a.lat)
	return a.lat[min(len(a.lat)-1, int(p*float64(len(a.lat))))]
}

type evaluation struct {
	per map[string]*agg
	all *agg
	// tops are each query's top 5 tool names, in order.
	tops [][]string
}

func (e evaluation) sources() []string {
	out := make([]string, 0, len(e.per))
	for s := range e.per {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// open builds a gateway over a fresh index in stateDir.
func (rc *runConfig) open(ctx context.Context, stateDir string) (*gateway.Gateway, time.Duration, error) {
	scfg := config.Search{Mode: rc.mode, DenseWeight: &rc.weight}
	t0 := time.Now()
	var idx search.Index
	var err error
	if rc.emb != nil {
		cache, err := search.OpenVecCache(filepath.Join(stateDir, "embeddings"), rc.emb.ModelID(), rc.emb.Dim())
		if err != nil {
			return nil, 0, err
		}
		h := search.NewHybrid(search.NewDense(rc.emb, cache, nil))
		h.Lex.Persist(filepath.Join(stateDir, search.LexicalCacheFile))
		idx = h
	} else if idx, err = search.Open(scfg, stateDir, slog.New(slog.DiscardHandler)); err != nil {
		return nil, 0, err
	}
	load := time.Since(t0)
	// A catalogue of 100,000 tools is past the default limits.max_tools.
	cfg := &config.Config{Servers: map[string]*config.Server{}, Filters: config.Filters{SimilarityThreshold: rc.threshold}, Search: scfg,
		Limits: config.Limits{MaxTools: 200000}}
	g, err := gateway.New(ctx, gateway.Options{Config: cfg, StateDir: stateDir, Index: idx})
	if err != nil {
		return nil, 0, err
	}
	return g, load, nil
}

func (rc *runConfig) realServers() ([]string, map[string][]*mcp.Tool) {
	byServer := map[string][]*mcp.Tool{}
	var order []string
	for _, t := range rc.tools {
		if _, ok := byServer[t.Server]; !ok {
			order = append(order, t.Server)
		}
		byServer[t.Server] = append(byServer[t.Server], &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	return order, byServer
}

func (rc *runConfig) run() error {
	ctx := context.Background()
	stateDir := rc.stateDir
	if stateDir == "" {
		dir, err := os.MkdirTemp("", "toolgate-retrieval-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		stateDir = dir
	}
	if rc.gen != nil && rc.synthetic && rc.mode != config.SearchLexical {
		t0 := time.Now()
		m := rc.emb
		if m == nil {
			loc, err := model.Find()
			if err != nil {
				return err
			}
			if m, err = embed.Load(loc.Dir); err != nil {
				return err
			}
		}
		if err := rc.gen.seedSyntheticVectors(ctx, m, stateDir, rc.distractors); err != nil {
			return fmt.Errorf("synthetic vectors: %w", err)
		}
		fmt.Printf("(synthetic vectors for %d distractors written to the embedding cache in %s; not part of any figure below)\n",
			rc.distractors, time.Since(t0).Round(time.Millisecond))
	}
	runtime.GC()
	resetPeak()
	g, load, err := rc.open(ctx, stateDir)
	if err != nil {
		return err
	}
	defer func() {
		if g != nil {
			g.Close()
		}
	}()
	order, byServer := rc.realServers()
	t1 := time.Now()
	for _, s := range order {
		if err := g.Catalog().SetServer(ctx, s, byServer[s]); err != nil {
			rc.warn(err)
		}
	}
	if err := g.WaitIndexed(ctx); err != nil {
		return err
	}
	build := time.Since(t1)
	base, err := evaluate(ctx, g, rc.qs)
	if err != nil {
		return err
	}
	rc.out.base = base
	rss, peak := procMem()
	fmt.Printf("== %s  (model load %s, index build %s for %d tools = %.0f tools/s, RSS %d MB, peak %d MB)\n", rc.mode,
		load.Round(time.Millisecond), build.Round(time.Millisecond), len(rc.tools), float64(len(rc.tools))/build.Seconds(), rss, peak)
	printEval(base)
	if rc.gen == nil {
		return writeMemProfile()
	}

	// A second gateway for the catalogue with distractors, so its searches
	// embed their queries afresh and the peak covers it alone.
	g.Close()
	g = nil
	runtime.GC()
	resetPeak()
	if g, _, err = rc.open(ctx, stateDir); err != nil {
		return err
	}
	n := len(rc.tools) + rc.distractors
	t2 := time.Now()
	for _, s := range order {
		if err := g.Catalog().SetServer(ctx, s, byServer[s]); err != nil {
			rc.warn(err)
		}
	}
	err = rc.gen.eachServer(rc.distractors, func(server string, defs []*mcp.Tool) error {
		if err := g.Catalog().SetServer(ctx, server, defs); err != nil {
			rc.warn(err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := g.WaitIndexed(ctx); err != nil {
		return err
	}
	dbuild := time.Since(t2)
	rc.out.tools = g.Catalog().Len()
	with, err := evaluate(ctx, g, rc.qs)
	if err != nil {
		return err
	}
	// The same queries again: their vectors are cached, so this is the
	// ranking alone (cosine scan, BM25, fusion, filters, definitions).
	c0 := cpuTime()
	again, err := evaluate(ctx, g, rc.qs)
	if err != nil {
		return err
	}
	cpuPerSearch := (cpuTime() - c0) / time.Duration(len(rc.qs))
	rc.out.with = with
	rss, peak = procMem()
	if err := writeMemProfile(); err != nil {
		return err
	}
	fmt.Printf("== %s with %d distractors: %d tools\n", rc.mode, rc.distractors, n)
	printEval(with)
	fmt.Printf("\n%-14s %8s %8s %7s %8s %8s %7s\n", "source", "R@5", "R@5+d", "loss", "MRR", "MRR+d", "loss")
	for _, s := range append(base.sources(), "overall") {
		a, b := base.all, with.all
		if s != "overall" {
			a, b = base.per[s], with.per[s]
		}
		fmt.Printf("%-14s %8.3f %8.3f %+7.1f %8.3f %8.3f %+7.1f\n", s, a.recall(2), b.recall(2), 100*(b.recall(2)-a.recall(2)),
			a.meanRR(), b.meanRR(), 100*(b.meanRR()-a.meanRR()))
	}
	fmt.Printf("\nat %d tools: search p50 %s p99 %s (query embedding included), %s / %s (query vector cached, %s of CPU each); index build %s (%.0f tools/s, %s vectors); RSS steady %d MB, peak %d MB\n",
		n, with.all.pct(0.5).Round(10*time.Microsecond), with.all.pct(0.99).Round(10*time.Microsecond),
		again.all.pct(0.5).Round(10*time.Microsecond), again.all.pct(0.99).Round(10*time.Microsecond), cpuPerSearch.Round(10*time.Microsecond), dbuild.Round(time.Millisecond),
		float64(n)/dbuild.Seconds(), map[bool]string{true: "cached synthetic", false: "model"}[rc.synthetic && rc.mode != config.SearchLexical],
		rss, peak)
	if !rc.restart {
		return nil
	}

	// Warm restart: a new index and gateway over the same state folder,
	// every vector cached. The definitions are made before the clock
	// starts (a real restart reads them from the catalogue cache).
	g.Close()
	g = nil
	type list struct {
		server string
		defs   []*mcp.Tool
	}
	var lists []list
	order, byServer = rc.realServers()
	for _, s := range order {
		lists = append(lists, list{s, byServer[s]})
	}
	rc.gen.eachServer(rc.distractors, func(server string, defs []*mcp.Tool) error {
		lists = append(lists, list{server, defs})
		return nil
	})
	runtime.GC()
	stopProfile, err := startRestartProfile()
	if err != nil {
		return err
	}
	t3, c3 := time.Now(), cpuTime()
	g, load, err = rc.open(ctx, stateDir)
	if err != nil {
		return err
	}
	for _, l := range lists {
		if err := g.Catalog().SetServer(ctx, l.server, l.defs); err != nil {
			rc.warn(err)
		}
	}
	lists = nil
	if err := g.WaitIndexed(ctx); err != nil {
		return err
	}
	res, note, err := g.Search(ctx, &extension.SearchRequest{Query: rc.qs[0].Query, TopK: 5})
	if err != nil {
		return err
	}
	warm, warmCPU := time.Since(t3), cpuTime()-c3
	stopProfile()
	if note != "" || len(res) == 0 {
		return fmt.Errorf("warm restart: search answered %d results with note %q", len(res), note)
	}
	fmt.Printf("warm restart at %d tools: %s until a hybrid search over every tool answers (model load %s); %s of CPU (the machine's load inflates wall time, not CPU)\n\n",
		n, warm.Round(time.Millisecond), load.Round(time.Millisecond), warmCPU.Round(time.Millisecond))
	if rc.out.warm, err = evaluate(ctx, g, rc.qs); err != nil {
		return err
	}
	rc.out.gateway, g = g, nil
	return nil
}

var restartProfilePath string

// startRestartProfile starts the -restart-cpuprofile profile, if asked for;
// the returned function stops it.
func startRestartProfile() (func(), error) {
	if restartProfilePath == "" {
		return func() {}, nil
	}
	f, err := os.Create(restartProfilePath)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func writeMemProfile() error {
	if memProfilePath == "" {
		return nil
	}
	f, err := os.Create(memProfilePath)
	if err != nil {
		return err
	}
	defer f.Close()
	runtime.GC()
	return pprof.WriteHeapProfile(f)
}

// evaluate runs every query through Gateway.Search, what search_tools runs.
func evaluate(ctx context.Context, g *gateway.Gateway, qs []queryRow) (evaluation, error) {
	e := evaluation{per: map[string]*agg{}, all: &agg{}}
	for _, q := range qs {
		ts := time.Now()
		res, _, err := g.Search(ctx, &extension.SearchRequest{Query: q.Query, TopK: 10})
		lat := time.Since(ts)
		if err != nil {
			return e, err
		}
		var top []string
		for _, r := range res[:min(5, len(res))] {
			top = append(top, r.Name)
		}
		e.tops = append(e.tops, top)
		names := make([][]string, len(res))
		for i, r := range res {
			// An entry covers a group when the tool or one of the
			// alternatives it names (other servers' near-duplicates,
			// callable as they are) is in the group.
			names[i] = append([]string{r.Name}, r.Alternatives...)
		}
		a := e.per[q.Source]
		if a == nil {
			a = &agg{}
			e.per[q.Source] = a
		}
		if showMisses != "" && (showMisses == "all" || showMisses == q.Source) && groupRecall(q.RelevantGroups, names, 5) < 1 {
			printMiss(q, res)
		}
		for _, x := range []*agg{a, e.all} {
			x.n++
			x.lat = append(x.lat, lat)
			for i, k := range ks {
				x.r[i] += groupRecall(q.RelevantGroups, names, k)
			}
			x.mrr += reciprocalRank(q.RelevantGroups, names)
		}
	}
	return e, nil
}

func printEval(e evaluation) {
	fmt.Printf("%-14s %5s %6s %6s %6s %6s %6s %9s %9s\n", "source", "n", "R@1", "R@3", "R@5", "R@10", "MRR", "p50", "p99")
	row := func(name string, a *agg) {
		fmt.Printf("%-14s %5d %6.3f %6.3f %6.3f %6.3f %6.3f %9s %9s\n", name, a.n, a.recall(0), a.recall(1), a.recall(2), a.recall(3), a.meanRR(),
			a.pct(0.5).Round(10*time.Microsecond), a.pct(0.99).Round(10*time.Microsecond))
	}
	for _, s := range e.sources() {
		row(s, e.per[s])
	}
	row("overall", e.all)
	fmt.Println()
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeak resets the kernel's peak resident set size (VmHWM), so the
// peak reported covers the index and gateway, not the set-up before them
// (Linux; a no-op elsewhere).
func resetPeak() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

func printMiss(q queryRow, res []gateway.Found) {
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
// ranked[i] is the i-th entry: the tool, then the alternatives it names.
func groupRecall(groups [][]string, ranked [][]string, k int) float64 {
	if len(groups) == 0 {
		return 0
	}
	top := ranked[:min(k, len(ranked))]
	found := 0
	for _, g := range groups {
		if slices.ContainsFunc(top, func(e []string) bool {
			return slices.ContainsFunc(e, func(n string) bool { return slices.Contains(g, n) })
		}) {
			found++
		}
	}
	return float64(found) / float64(len(groups))
}

func reciprocalRank(groups [][]string, ranked [][]string) float64 {
	for i, e := range ranked {
		for _, g := range groups {
			if slices.ContainsFunc(e, func(n string) bool { return slices.Contains(g, n) }) {
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
