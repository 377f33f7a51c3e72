package search

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/toolgate/toolgate/internal/state"
)

// sharedTimeout bounds one Redis round trip of the shared cache: a cache
// that is slow to reach only costs a start, it must not hold one up.
const sharedTimeout = 2 * time.Second

func (c *VecCache) sharedKey() string { return c.shared.Key("vec", filepath.Base(c.path)) }

// Share keeps the cache in b's Redis as well, for replicas sharing state:
// it first copies into the file every vector other replicas stored that
// the file lacks (a new replica starts warm: it embeds only what nobody
// has), and later Puts are stored in Redis too. The cache owns b from
// then on and closes it with itself. Redis being away is not an error:
// the cache works from its file.
func (c *VecCache) Share(b *state.Backend) (warmed int, err error) {
	c.mu.Lock()
	c.shared = b
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 4*sharedTimeout)
	defer cancel()
	rec := 4 * c.dim
	var cursor uint64
	for {
		kv, next, err := b.Client.HScan(ctx, c.sharedKey(), cursor, "", 1000).Result()
		if err != nil {
			return warmed, fmt.Errorf("embedding cache: %w", b.Err(err))
		}
		var keys [][32]byte
		var vecs [][]float32
		for i := 0; i+1 < len(kv); i += 2 {
			if len(kv[i]) != 32 || len(kv[i+1]) != rec {
				continue // not a record of this cache
			}
			k := [32]byte([]byte(kv[i]))
			if c.Has(k) {
				continue
			}
			v := make([]float32, c.dim)
			for j := range v {
				v[j] = math.Float32frombits(binary.LittleEndian.Uint32([]byte(kv[i+1][4*j:])))
			}
			keys, vecs = append(keys, k), append(vecs, v)
		}
		if len(keys) > 0 {
			if err := c.putLocal(keys, vecs); err != nil {
				return warmed, err
			}
			warmed += len(keys)
		}
		if cursor = next; cursor == 0 {
			return warmed, nil
		}
	}
}

// putLocal is Put without storing in Redis (what came from there).
func (c *VecCache) putLocal(keys [][32]byte, vecs [][]float32) error { return c.put(keys, vecs, false) }

// putShared stores n records (key then vector, as in the file) in Redis;
// c.mu is held. A failure is left alone: the file has them.
func (c *VecCache) putShared(buf []byte, n int) {
	size := int(c.recSize())
	args := make([]any, 0, 2*n)
	for i := range n {
		r := buf[i*size : (i+1)*size]
		args = append(args, string(r[:32]), string(r[32:]))
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	_ = c.shared.Client.HSet(ctx, c.sharedKey(), args...).Err()
}
