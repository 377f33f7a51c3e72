package search

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/internal/state"
)

// VecCache persists embeddings keyed by SHA-256(model id, text), so a
// restart does not re-embed known tools. The file is append-only: a header
// (magic, dimension) then fixed-size records (key, little-endian float32
// vector); a torn last record, from a crash mid-write, is cut off when the
// file is opened. Only the keys and their file offsets are held in memory;
// vectors are read back on demand, so the cache costs no second copy of the
// index's vectors.
type VecCache struct {
	path string
	dim  int

	mu  sync.Mutex
	f   *os.File
	off map[[32]byte]int64
	end int64

	// shared, when set, also keeps the vectors in Redis (see Share).
	shared *state.Backend
}

var vecMagic = [8]byte{'T', 'G', 'V', 'E', 'C', '0', '0', '1'}

const vecHeader = 12

// CacheKey is the cache key of text embedded by model.
func CacheKey(model, text string) [32]byte {
	h := sha256.New()
	h.Write([]byte(model))
	h.Write([]byte{0})
	h.Write([]byte(text))
	var k [32]byte
	copy(k[:], h.Sum(nil))
	return k
}

// OpenVecCache opens or creates the cache for model in dir.
func OpenVecCache(dir, model string, dim int) (*VecCache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedding cache: %v", err)
	}
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '_'
	}, model) + ".vec"
	c := &VecCache{path: filepath.Join(dir, name), dim: dim, off: map[[32]byte]int64{}}
	f, err := os.OpenFile(c.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embedding cache: %v", err)
	}
	c.f = f
	if err := c.load(); err != nil {
		f.Close()
		return nil, fmt.Errorf("embedding cache %s: %v (delete the file to rebuild it)", c.path, err)
	}
	return c, nil
}

func (c *VecCache) recSize() int64 { return int64(32 + 4*c.dim) }

func (c *VecCache) load() error {
	st, err := c.f.Stat()
	if err != nil {
		return err
	}
	if st.Size() < vecHeader {
		// New, or torn before its header was complete.
		var hdr [vecHeader]byte
		copy(hdr[:8], vecMagic[:])
		binary.LittleEndian.PutUint32(hdr[8:], uint32(c.dim))
		if err := c.f.Truncate(0); err != nil {
			return err
		}
		if _, err := c.f.WriteAt(hdr[:], 0); err != nil {
			return err
		}
		c.end = vecHeader
		return nil
	}
	r := bufio.NewReaderSize(io.NewSectionReader(c.f, 0, st.Size()), 1<<20)
	var hdr [vecHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil || [8]byte(hdr[:8]) != vecMagic {
		return errors.New("not an embedding cache file")
	}
	if d := int(binary.LittleEndian.Uint32(hdr[8:])); d != c.dim {
		return fmt.Errorf("cache holds %d-dimensional vectors, the model makes %d", d, c.dim)
	}
	n := (st.Size() - vecHeader) / c.recSize()
	skip := int(c.recSize()) - 32
	for i := int64(0); i < n; i++ {
		var k [32]byte
		if _, err := io.ReadFull(r, k[:]); err != nil {
			return err
		}
		if _, err := r.Discard(skip); err != nil {
			return err
		}
		c.off[k] = vecHeader + i*c.recSize() + 32
	}
	c.end = vecHeader + n*c.recSize()
	if c.end != st.Size() {
		return c.f.Truncate(c.end)
	}
	return nil
}

// Has reports whether key is cached.
func (c *VecCache) Has(k [32]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.off[k]
	return ok
}

// Get returns the cached vector for key.
func (c *VecCache) Get(k [32]byte) ([]float32, bool) {
	v := make([]float32, c.dim)
	if !c.GetInto(k, v) {
		return nil, false
	}
	return v, true
}

// GetInto reads the cached vector for key into dst (len ≥ dimension).
func (c *VecCache) GetInto(k [32]byte, dst []float32) bool {
	c.mu.Lock()
	off, ok := c.off[k]
	c.mu.Unlock()
	if !ok {
		return false
	}
	buf := make([]byte, 4*c.dim)
	if _, err := c.f.ReadAt(buf, off); err != nil {
		return false
	}
	for j := range c.dim {
		dst[j] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*j:]))
	}
	return true
}

// Len is the number of cached vectors.
func (c *VecCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.off)
}

// Put stores vectors; keys already cached are skipped.
func (c *VecCache) Put(keys [][32]byte, vecs [][]float32) error { return c.put(keys, vecs, true) }

// put is Put; mirror also stores the new vectors in Redis when shared.
func (c *VecCache) put(keys [][32]byte, vecs [][]float32, mirror bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf := make([]byte, 0, len(keys)*int(c.recSize()))
	var added [][32]byte
	inBatch := map[[32]byte]bool{}
	for i, k := range keys {
		if _, dup := c.off[k]; dup || inBatch[k] || len(vecs[i]) != c.dim {
			continue
		}
		inBatch[k] = true
		added = append(added, k)
		buf = append(buf, k[:]...)
		for _, x := range vecs[i] {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
		}
	}
	if len(buf) == 0 {
		return nil
	}
	if _, err := c.f.WriteAt(buf, c.end); err != nil {
		// A partial write leaves a torn tail that the next open cuts off;
		// later records go after it, so cut it now.
		_ = c.f.Truncate(c.end)
		return err
	}
	for i, k := range added {
		c.off[k] = c.end + int64(i)*c.recSize() + 32
	}
	c.end += int64(len(buf))
	if c.shared != nil && mirror {
		c.putShared(buf, len(added))
	}
	return nil
}

// Close closes the file, and the Redis client Share handed over.
func (c *VecCache) Close() error {
	err := c.f.Close()
	if c.shared != nil {
		c.shared.Close()
	}
	return err
}
