package poison

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// output4KB is a realistic 4 KB tool result: an email thread with a table.
func output4KB(salt int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "From: ops-%d@example.com\nSubject: weekly report\n\n", salt)
	for i := 0; b.Len() < 4096; i++ {
		fmt.Fprintf(&b, "Item %d: the nightly job processed %d records in %d seconds and wrote the summary to the shared drive. ", i, 1000+i*37, 20+i%7)
		if i%4 == 3 {
			fmt.Fprintf(&b, "\n| host-%d | ok | %d ms |\n", i, 30+i)
		}
	}
	return b.String()[:4096]
}

// authoredRows reads the benign carriers and the attacks of the authored
// output sets in bench/poisoning.
func authoredRows(tb testing.TB) (carriers, attacks []string) {
	tb.Helper()
	for _, name := range []string{"authored_outputs.jsonl", "authored2_outputs.jsonl"} {
		for _, r := range jsonLines[struct{ Text, Role string }](tb, filepath.Join("..", "..", "bench", "poisoning", name)) {
			if r.Role == "attack" {
				attacks = append(attacks, r.Text)
			} else {
				carriers = append(carriers, r.Text)
			}
		}
	}
	return carriers, attacks
}

// benignOutputs are n distinct benign 4 KB results of the kinds tools
// return: the email thread above, pieces of this repository's own files
// (Markdown documentation, Go source, package-lock.json: what a file or
// code tool returns), and runs of the authored carriers (tickets, logs,
// JSON, search results). Each is stamped with its number so that none is
// cached.
func benignOutputs(tb testing.TB, n int) []string {
	carriers, _ := authoredRows(tb)
	var pool []string
	for _, pat := range []string{"../../docs/*.md", "../../README.md", "../../internal/config/*.go", "../../internal/upstream/*.go", "../../internal/catalog/*.go", "../../package-lock.json"} {
		files, _ := filepath.Glob(pat)
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				tb.Fatal(err)
			}
			for off := 0; off+4096 <= len(raw) && len(pool) < 4000; off += 4096 {
				pool = append(pool, string(raw[off:off+4096]))
			}
		}
	}
	if len(pool) == 0 {
		tb.Fatal("no repository files to build outputs from")
	}
	out := make([]string, n)
	for i := range out {
		switch i % 4 {
		case 0:
			out[i] = output4KB(i)
		case 1:
			var b strings.Builder
			fmt.Fprintf(&b, "result %d\n", i)
			for j := i; b.Len() < 4096; j++ {
				b.WriteString(carriers[(j*7)%len(carriers)])
				b.WriteString("\n\n")
			}
			out[i] = clip(b.String(), 4096)
		default:
			out[i] = clip(fmt.Sprintf("result %d\n", i)+pool[(i*131)%len(pool)], 4096)
		}
	}
	return out
}

// BenchmarkScanOutput4KB measures output scans of 4 KB results with the
// committed classifier on MiniLM and every rule, reporting the median and
// 90th percentile per scan. "benign" scans distinct benign results
// (benignOutputs, never cached) through the screen; "attacked" the same with
// an authored injection in the middle, so the rules run and the marked
// windows are embedded; "cached" a result scanned before (findings cached
// by content hash); "no_screen" benign results with the screen off (every
// part embedded); "rules_only" and "screen_only" time the two cheap parts
// alone, and screen_only reports the share of benign outputs with a marked
// sentence.
//
//	go test -run '^$' -bench ScanOutput4KB -benchtime 40x ./internal/poison
func BenchmarkScanOutput4KB(b *testing.B) {
	emb, err := DefaultEmbedder()
	if err != nil {
		b.Skipf("MiniLM not installed: %v", err)
	}
	newDet := func(opt Options) *Detector {
		opt.Embedder, opt.AllRules = emb, true
		d, err := NewDetectorWith(Config{}, opt)
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	_, attacks := authoredRows(b)
	run := func(b *testing.B, d *Detector, texts func(n int) []string) {
		ts := texts(b.N)
		times := make([]time.Duration, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			d.ScanOutput(ts[i])
			times[i] = time.Since(start)
		}
		b.StopTimer()
		slices.Sort(times)
		b.ReportMetric(float64(times[len(times)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(times[len(times)*9/10].Microseconds()), "p90-µs")
	}
	b.Run("benign", func(b *testing.B) {
		run(b, newDet(Options{}), func(n int) []string { return benignOutputs(b, n) })
	})
	b.Run("attacked", func(b *testing.B) {
		run(b, newDet(Options{}), func(n int) []string {
			ts := benignOutputs(b, n)
			for i := range ts {
				ts[i] = insert(ts[i], attacks[i%len(attacks)])
			}
			return ts
		})
	})
	b.Run("cached", func(b *testing.B) {
		d := newDet(Options{})
		text := benignOutputs(b, 2)[1]
		d.ScanOutput(text)
		run(b, d, func(n int) []string {
			ts := make([]string, n)
			for i := range ts {
				ts[i] = text
			}
			return ts
		})
	})
	b.Run("no_screen", func(b *testing.B) {
		run(b, newDet(Options{NoScreen: true}), func(n int) []string { return benignOutputs(b, n) })
	})
	// The parts of the cost: every rule without the classifier, and the
	// screen alone.
	b.Run("rules_only", func(b *testing.B) {
		d, err := NewDetector(Config{})
		if err != nil {
			b.Fatal(err)
		}
		run(b, d, func(n int) []string { return benignOutputs(b, n) })
	})
	b.Run("screen_only", func(b *testing.B) {
		m, err := BuiltinModels()
		if err != nil {
			b.Fatal(err)
		}
		ts := benignOutputs(b, b.N)
		marked := 0
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if len(screen(m.OutputGate, m.HashBits, ts[i]).suspicious) > 0 {
				marked++
			}
		}
		b.ReportMetric(float64(marked)/float64(b.N), "marked-share")
	})
}

// insert puts inj on its own line in the middle of text.
func insert(text, inj string) string {
	lines := strings.Split(text, "\n")
	k := len(lines) / 2
	return strings.Join(lines[:k], "\n") + "\n" + inj + "\n" + strings.Join(lines[k:], "\n")
}

// BenchmarkScanDefinitionClassifier measures definition scans (never
// cached: each description is distinct) with the committed classifier on
// MiniLM: "attention" as shipped, "views_only" the same weights without the
// attention poolings (so the token vectors are neither copied nor pooled),
// for the cost of the heads.
//
//	go test -run '^$' -bench ScanDefinitionClassifier -benchtime 200x ./internal/poison
func BenchmarkScanDefinitionClassifier(b *testing.B) {
	emb, err := DefaultEmbedder()
	if err != nil {
		b.Skipf("MiniLM not installed: %v", err)
	}
	raw, err := os.ReadFile("../../bench/poisoning/authored5_defs.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	var descs []string
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var r struct{ Text string }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			b.Fatal(err)
		}
		descs = append(descs, r.Text)
	}
	for _, variant := range []string{"attention", "views_only"} {
		b.Run(variant, func(b *testing.B) {
			m, err := BuiltinModels()
			if err != nil {
				b.Fatal(err)
			}
			if a := m.Definition.Attention; variant == "views_only" && a != nil {
				dm := *m.Definition
				dm.Weights, dm.Attention = dm.Weights[:len(dm.Weights)-a.Heads*a.Width()], nil
				m.Definition = &dm
			}
			d, err := NewDetectorWith(Config{}, Options{Embedder: emb, Models: m})
			if err != nil {
				b.Fatal(err)
			}
			times := make([]time.Duration, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// A distinct text each time, so nothing is cached.
				text := fmt.Sprintf("%s (v%d)", descs[i%len(descs)], i)
				start := time.Now()
				d.ScanDefinition("tool", text, nil)
				times[i] = time.Since(start)
			}
			b.StopTimer()
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(times[len(times)*9/10].Microseconds()), "p90-µs")
		})
	}
}
