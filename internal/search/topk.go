package search

import (
	"cmp"
	"slices"
	"strings"
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
