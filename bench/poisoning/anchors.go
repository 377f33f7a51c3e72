package main

// Anchor similarity (experiment): how close a definition's parts come to a
// few sentences of attack intent and of honest guidance, in MiniLM's own
// sentence space, with nothing fitted to rows.

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolgate/toolgate/internal/poison"
)

type anchorSet struct {
	attack, benign [][]float32
}

func loadAnchors(path string, emb *cachedEmbedder) anchorSet {
	f, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	var a, b []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "A "):
			a = append(a, line[2:])
		case strings.HasPrefix(line, "B "):
			b = append(b, line[2:])
		}
	}
	return anchorSet{attack: meanVecs(emb, a), benign: meanVecs(emb, b)}
}

// meanVecs embeds texts and keeps the mean view, normalised.
func meanVecs(emb *cachedEmbedder, texts []string) [][]float32 {
	vs, err := emb.Embed(context.Background(), texts)
	if err != nil {
		log.Fatal(err)
	}
	d := emb.m.Dim()
	out := make([][]float32, len(vs))
	for i, v := range vs {
		w := append([]float32(nil), v[:d]...)
		var n float64
		for _, x := range w {
			n += float64(x) * float64(x)
		}
		n = math.Sqrt(n)
		for j := range w {
			w[j] = float32(float64(w[j]) / n)
		}
		out[i] = w
	}
	return out
}

func maxCos(v []float32, set [][]float32) float64 {
	best := -1.0
	for _, a := range set {
		best = max(best, poison.Cosine(v, a))
	}
	return best
}

// anchorScores are a document's anchor figures: the highest similarity of
// a part to an attack anchor, and the highest margin of a part's attack
// similarity over its benign one.
func anchorScores(emb *cachedEmbedder, as anchorSet, text string) (att, margin float64) {
	parts := poison.Parts(text)
	if len(parts) == 0 {
		parts = []string{text}
	}
	att, margin = -1, -2
	for _, v := range meanVecs(emb, parts) {
		a, b := maxCos(v, as.attack), maxCos(v, as.benign)
		att = max(att, a)
		margin = max(margin, a-b)
	}
	return att, margin
}

func anchorExperiment(path string) {
	emb, err := newCachedEmbedder()
	if err != nil {
		log.Fatal(err)
	}
	defer emb.save()
	as := loadAnchors(path, emb)
	shipped, err := poison.BuiltinModels()
	if err != nil {
		log.Fatal(err)
	}
	det, err := poison.NewDetectorWith(poison.Config{}, poison.Options{Embedder: emb, Models: shipped})
	if err != nil {
		log.Fatal(err)
	}
	here := filepath.Join("bench", "poisoning")
	batches := []string{"authored", "authored2", "authored3", "authored5", "authored6", "authored7", "authored8", "authored9", "authored10", "authored11", "authored12"}
	for _, b := range batches {
		docs := defDocs(nil, mustLoad(filepath.Join(here, b+"_defs.jsonl")))
		cls, att, mar := map[int]float64{}, map[int]float64{}, map[int]float64{}
		idx := make([]int, len(docs))
		for i, d := range docs {
			idx[i] = i
			s, _, err := det.ClassifierScore(poison.KindDefinition, d.text)
			if err != nil {
				log.Fatal(err)
			}
			cls[i] = s
			att[i], mar[i] = anchorScores(emb, as, d.text)
		}
		line := fmt.Sprintf("%-11s", b)
		for _, m := range []struct {
			name string
			s    map[int]float64
		}{{"classifier", cls}, {"attack-anchor", att}, {"margin", mar}} {
			auc, rec, _ := separation(docs, idx, m.s, 0.02)
			line += fmt.Sprintf("  %s %.3f/%.3f", m.name, auc, rec)
		}
		for _, w := range []float64{1, 2, 4, 8} {
			comb := map[int]float64{}
			for i := range docs {
				p := min(max(cls[i], 1e-6), 1-1e-6)
				comb[i] = math.Log(p/(1-p)) + w*10*mar[i]
			}
			auc, rec, _ := separation(docs, idx, comb, 0.02)
			line += fmt.Sprintf("  w%g %.3f/%.3f", w, auc, rec)
		}
		fmt.Println(line)
	}
}
