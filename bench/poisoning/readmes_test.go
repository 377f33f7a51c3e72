package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestChunkParagraphs checks README chunks stay within the size, keep every
// word in order, cut an over-long paragraph between words rather than drop
// it, and leave out a text too short to be a result.
func TestChunkParagraphs(t *testing.T) {
	var paras []string
	for i := range 12 {
		var b strings.Builder
		for j := range 20 + 15*i {
			fmt.Fprintf(&b, "w%d_%d ", i, j)
		}
		paras = append(paras, strings.TrimSpace(b.String()))
	}
	long := strings.Repeat("x ", 700) // 1400 bytes, more than max
	text := strings.Join(append(paras, long, "too short"), "\n\n")
	const max = 1000
	chunks := chunkParagraphs(text, max)
	var got []string
	for _, c := range chunks {
		if len(c) > max {
			t.Fatalf("chunk of %d bytes, max %d", len(c), max)
		}
		if n := len(strings.Fields(c)); n < 20 {
			t.Fatalf("chunk of %d words kept: %q", n, c)
		}
		got = append(got, strings.Fields(c)...)
	}
	// "too short" rides along with the end of the long paragraph.
	want := strings.Fields(text)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("chunks lost or reordered words: %d words, want %d", len(got), len(want))
	}
	if c := chunkParagraphs("A heading\n\nand two lines.", max); len(c) != 0 {
		t.Fatalf("a text of fewer than 20 words gave chunks %q", c)
	}
}
