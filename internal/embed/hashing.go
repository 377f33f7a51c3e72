package embed

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"unicode"
)

// Hashing is a deterministic stand-in Embedder for tests that exercise the
// plumbing around embeddings (indexing, caching, ranking code paths) but do
// not measure retrieval quality. It is NOT a semantic model: it hashes
// lowercased words and character 3-grams into Dim() buckets (feature
// hashing with a sign bit) and L2-normalises the result, so texts sharing
// words or word fragments get similar vectors. It needs no model files.
type Hashing struct {
	dim int
}

// NewHashing returns the stand-in hashing Embedder with dim dimensions
// (dim < 1 is treated as 384). See [Hashing].
func NewHashing(dim int) Embedder {
	if dim < 1 {
		dim = 384
	}
	return &Hashing{dim: dim}
}

// Dim returns the vector size.
func (h *Hashing) Dim() int { return h.dim }

// ModelID returns "hashing-v1/<dim>".
func (h *Hashing) ModelID() string { return fmt.Sprintf("hashing-v1/%d", h.dim) }

// Embed returns one unit vector per text (the zero vector for texts with
// no letters or digits).
func (h *Hashing) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		out[i] = h.embedOne(t)
	}
	return out, nil
}

func (h *Hashing) embedOne(text string) []float32 {
	v := make([]float32, h.dim)
	add := func(feature string, w float32) {
		f := fnv.New64a()
		f.Write([]byte(feature))
		x := f.Sum64()
		idx := int(x % uint64(h.dim))
		if x>>63 == 1 {
			w = -w
		}
		v[idx] += w
	}
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for _, w := range words {
		add("w:"+w, 1)
		r := []rune("^" + w + "$")
		for i := 0; i+3 <= len(r); i++ {
			add("c:"+string(r[i:i+3]), 0.5)
		}
	}
	var n2 float64
	for _, x := range v {
		n2 += float64(x) * float64(x)
	}
	if n2 > 0 {
		inv := float32(1 / math.Sqrt(n2))
		for i := range v {
			v[i] *= inv
		}
	}
	return v
}
