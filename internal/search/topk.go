package search

import (
	"cmp"
	"slices"
	"strings"
	"sync"
)

func hitOrder(a, b Hit) int {
	if c := cmp.Compare(b.Score, a.Score); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// SortHits orders hits by descending score, then by ID for determinism.
func SortHits(hits []Hit) { slices.SortFunc(hits, hitOrder) }

// TopHits returns the best limit hits (all when limit ≤ 0) in SortHits
// order. It reorders hits in place and selects before sorting, so a search
// over a large catalogue does not sort every candidate.
func TopHits(hits []Hit, limit int) []Hit {
	if limit > 0 && len(hits) > limit {
		selectTop(hits, limit)
		hits = hits[:limit]
	}
	SortHits(hits)
	return hits
}

// selectTop moves the k best hits to hits[:k] (quickselect, median of three).
func selectTop(hits []Hit, k int) {
	lo, hi := 0, len(hits)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if hitOrder(hits[mid], hits[lo]) < 0 {
			hits[mid], hits[lo] = hits[lo], hits[mid]
		}
		if hitOrder(hits[hi], hits[lo]) < 0 {
			hits[hi], hits[lo] = hits[lo], hits[hi]
		}
		if hitOrder(hits[hi], hits[mid]) < 0 {
			hits[hi], hits[mid] = hits[mid], hits[hi]
		}
		pivot := hits[mid]
		i, j := lo, hi
		for i <= j {
			for hitOrder(hits[i], pivot) < 0 {
				i++
			}
			for hitOrder(pivot, hits[j]) < 0 {
				j--
			}
			if i <= j {
				hits[i], hits[j] = hits[j], hits[i]
				i++
				j--
			}
		}
		switch {
		case k-1 <= j:
			hi = j
		case k-1 >= i:
			lo = i
		default:
			return
		}
	}
}

// Per-search scratch arrays, one entry per slot, are reused: at 100,000
// tools a search would otherwise allocate 1.6 MB of them.
var (
	f32Pool sync.Pool // *[]float32
	i32Pool sync.Pool // *[]int32
)

// getF32 returns a slice of n float32 from the pool. With zeroed, callers
// must put it back all zero (the lexical scorer clears what it touched);
// without, its contents are garbage.
func getF32(n int, zeroed bool) []float32 {
	pool := &f32Pool
	if zeroed {
		pool = &f32ZeroPool
	}
	if p, ok := pool.Get().(*[]float32); ok && cap(*p) >= n {
		return (*p)[:n]
	}
	return make([]float32, n)
}

var f32ZeroPool sync.Pool

func putF32(s []float32)       { f32Pool.Put(&s) }
func putZeroedF32(s []float32) { f32ZeroPool.Put(&s) }

func getI32(n int) []int32 {
	if p, ok := i32Pool.Get().(*[]int32); ok && cap(*p) >= n {
		return (*p)[:n]
	}
	return make([]int32, n)
}

func putI32(s []int32) { i32Pool.Put(&s) }
