package search

import (
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/state"
	"github.com/toolgate/toolgate/internal/state/redistest"
)

// A new replica's embedding cache starts warm with what another replica
// embedded; vectors it already has are not copied twice, and vectors of
// another model are not taken.
func TestVecCacheSharedWarmStart(t *testing.T) {
	a, b := redistest.Shared(t)
	ca, err := OpenVecCache(t.TempDir(), "m1", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	if _, err := ca.Share(a); err != nil {
		t.Fatal(err)
	}
	k1, k2 := CacheKey("m1", "read a file"), CacheKey("m1", "send mail")
	if err := ca.Put([][32]byte{k1, k2}, [][]float32{{1, 2, 3}, {4, 5, 6}}); err != nil {
		t.Fatal(err)
	}

	cb, err := OpenVecCache(t.TempDir(), "m1", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	if err := cb.Put([][32]byte{k1}, [][]float32{{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	n, err := cb.Share(b)
	if err != nil || n != 1 {
		t.Fatalf("warmed %d, %v; want the 1 vector b lacked", n, err)
	}
	if v, ok := cb.Get(k2); !ok || !slices.Equal(v, []float32{4, 5, 6}) {
		t.Fatalf("warmed vector = %v, %v", v, ok)
	}

	other, err := OpenVecCache(t.TempDir(), "m2", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	c := state.NewForTest(redis.NewClient(&redis.Options{Addr: a.Client.Options().Addr}), a.Key(), "c")
	if n, _ := other.Share(c); n != 0 {
		t.Fatalf("a cache of another model took %d vectors", n)
	}
}
