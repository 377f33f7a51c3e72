package main

import (
	"slices"
	"strings"
	"testing"
)

// TestGoDocDocs checks the Go doc-comment negatives are the same on every
// run (the committed weights must reproduce byte for byte), are short
// benign prose, and are not counted in the threshold's FPR.
func TestGoDocDocs(t *testing.T) {
	a, err := goDocDocs()
	if err != nil {
		t.Fatal(err)
	}
	b, err := goDocDocs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(a, b, func(x, y doc) bool { return x == y }) {
		t.Fatal("two reads of the Go doc comments differ")
	}
	if len(a) < 300 {
		t.Fatalf("%d doc comments, want several hundred", len(a))
	}
	for _, d := range a {
		if d.malicious || d.source != "godoc" || len(d.text) > 600 || len(strings.Fields(d.text)) < 8 {
			t.Fatalf("bad godoc document %+v", d)
		}
	}
	if !auxNegative["godoc"] {
		t.Fatal("godoc documents would count in the threshold's clean-document FPR")
	}
}
