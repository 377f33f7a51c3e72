package embed

import (
	"context"
	"fmt"
	"strings"
)

// Pooling is how a text's token vectors become its vector: the mean of the
// last layer (PoolMean, what all-MiniLM-L6-v2 was trained with and what
// semantic search uses), optionally followed by more views of the same
// forward pass. A mean keeps what a text is about and dilutes a single
// imperative among many words; the per-dimension maximum and an earlier
// layer keep more of its wording, for a classifier to read.
type Pooling uint8

const (
	// PoolMean is the mean of the last layer's token vectors alone.
	PoolMean Pooling = 0
	// PoolMax adds the per-dimension maximum over the last layer's tokens.
	PoolMax Pooling = 1 << 0
	// PoolMid adds the mean of the third layer's token vectors.
	PoolMid Pooling = 1 << 1
)

// midLayer is the (1-based) layer PoolMid reads.
const midLayer = 3

type view struct {
	layer int // 1-based layer whose output is pooled; 0 is the last
	max   bool
}

func (p Pooling) views() []view {
	v := []view{{0, false}}
	if p&PoolMax != 0 {
		v = append(v, view{0, true})
	}
	if p&PoolMid != 0 {
		v = append(v, view{midLayer, false})
	}
	return v
}

// Views names the parts of a pooled vector in order, each Dim()/len(Views())
// long: "mean", then "max" and "mid" when p has them.
func (p Pooling) Views() []string {
	var names []string
	for _, v := range p.views() {
		switch {
		case v.max:
			names = append(names, "max")
		case v.layer == midLayer:
			names = append(names, "mid")
		default:
			names = append(names, "mean")
		}
	}
	return names
}

func (p Pooling) String() string {
	s := "mean"
	if p&PoolMax != 0 {
		s += "+max"
	}
	if p&PoolMid != 0 {
		s += "+mid"
	}
	return s
}

// ParsePooling reads "mean" followed by any of "+max", "+mid" (the
// form String writes).
func ParsePooling(s string) (Pooling, error) {
	parts := strings.Split(s, "+")
	if parts[0] != "mean" {
		return 0, fmt.Errorf("embed: pooling %q must start with mean (e.g. mean, mean+max, mean+max+mid)", s)
	}
	var p Pooling
	for _, v := range parts[1:] {
		switch v {
		case "max":
			p |= PoolMax
		case "mid":
			p |= PoolMid
		default:
			return 0, fmt.Errorf("embed: pooling %q: unknown view %q (want max or mid)", s, v)
		}
	}
	if p.String() != s {
		return 0, fmt.Errorf("embed: pooling %q: write it as %q", s, p.String())
	}
	return p, nil
}

// Pooled returns an Embedder over m's weights with pooling p. Its vectors
// are unit length; their ModelID names the pooling unless it is PoolMean.
func (m *MiniLM) Pooled(p Pooling) Embedder {
	if p == PoolMean {
		return m
	}
	return pooled{m, p}
}

type pooled struct {
	m *MiniLM
	p Pooling
}

func (e pooled) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return e.m.embed(ctx, texts, e.p)
}

// EmbedTokens is Embed and the token vectors of layers, from one pass
// (MiniLM.Encode).
func (e pooled) EmbedTokens(ctx context.Context, texts []string, layers ...int) (vecs, tokens [][]float32, err error) {
	return e.m.Encode(ctx, texts, e.p, layers...)
}

func (e pooled) Dim() int        { return e.m.cfg.HiddenSize * len(e.p.views()) }
func (e pooled) ModelID() string { return e.m.modelID + "+" + e.p.String() }

// EmbedTokens is Embed and the token vectors of layers, from one pass.
func (m *MiniLM) EmbedTokens(ctx context.Context, texts []string, layers ...int) (vecs, tokens [][]float32, err error) {
	return m.Encode(ctx, texts, PoolMean, layers...)
}
