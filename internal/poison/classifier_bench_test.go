package poison

import (
	"fmt"
	"strings"
	"testing"
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

// BenchmarkScanOutput4KB measures an output scan of a 4 KB result with the
// classifier on MiniLM: cold (a new text every time, so every part is
// embedded) and cached (the same text again, as for a repeated result).
//
//	go test -run '^$' -bench ScanOutput4KB -benchtime 20x ./internal/poison
func BenchmarkScanOutput4KB(b *testing.B) {
	emb, err := DefaultEmbedder()
	if err != nil {
		b.Skipf("MiniLM not installed: %v", err)
	}
	d, err := NewDetectorWith(Config{}, Options{Embedder: emb, AllRules: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("cold", func(b *testing.B) {
		texts := make([]string, b.N)
		for i := range texts {
			texts[i] = output4KB(i)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			d.ScanOutput(texts[i])
		}
	})
	b.Run("cached", func(b *testing.B) {
		text := output4KB(-1)
		d.ScanOutput(text)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			d.ScanOutput(text)
		}
	})
	b.Run("rules_only", func(b *testing.B) {
		r, _ := NewDetector(Config{})
		text := output4KB(-2)
		for i := 0; i < b.N; i++ {
			r.ScanOutput(text)
		}
	})
}
