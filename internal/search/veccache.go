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
)

// VecCache persists embeddings keyed by SHA-256(model id, text), so a
// restart does not re-embed known tools. The file is append-only: a header
// (magic, dimension) then fixed-size records (key, vector); a torn last
// record, from a crash mid-write, is cut off when the file is opened.
type VecCache struct {
	path string
	dim  int

	mu   sync.Mutex
	f    *os.File
	vecs map[[32]byte][]float32
}

var vecMagic = [8]byte{'T', 'G', 'V', 'E', 'C', '0', '0', '1'}

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
	c := &VecCache{path: filepath.Join(dir, name), dim: dim, vecs: map[[32]byte][]float32{}}
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
	if st.Size() == 0 {
		var hdr [12]byte
		copy(hdr[:8], vecMagic[:])
		binary.LittleEndian.PutUint32(hdr[8:], uint32(c.dim))
		_, err := c.f.Write(hdr[:])
		return err
	}
	r := bufio.NewReaderSize(c.f, 1<<20)
	var hdr [12]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil || [8]byte(hdr[:8]) != vecMagic {
		return errors.New("not an embedding cache file")
	}
	if d := int(binary.LittleEndian.Uint32(hdr[8:])); d != c.dim {
		return fmt.Errorf("cache holds %d-dimensional vectors, the model makes %d", d, c.dim)
	}
	n := (st.Size() - 12) / c.recSize()
	rec := make([]byte, c.recSize())
	for i := int64(0); i < n; i++ {
		if _, err := io.ReadFull(r, rec); err != nil {
			return err
		}
		var k [32]byte
		copy(k[:], rec)
		v := make([]float32, c.dim)
		for j := range v {
			v[j] = math.Float32frombits(binary.LittleEndian.Uint32(rec[32+4*j:]))
		}
		c.vecs[k] = v
	}
	end := 12 + n*c.recSize()
	if end != st.Size() {
		if err := c.f.Truncate(end); err != nil {
			return err
		}
	}
	_, err = c.f.Seek(end, io.SeekStart)
	return err
}

// Get returns the cached vector for key.
func (c *VecCache) Get(k [32]byte) ([]float32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.vecs[k]
	return v, ok
}

// Len is the number of cached vectors.
func (c *VecCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.vecs)
}

// Put stores vectors; a write error is returned but the vectors stay
// usable in memory.
func (c *VecCache) Put(keys [][32]byte, vecs [][]float32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf := make([]byte, 0, len(keys)*int(c.recSize()))
	for i, k := range keys {
		if _, dup := c.vecs[k]; dup || len(vecs[i]) != c.dim {
			continue
		}
		c.vecs[k] = vecs[i]
		buf = append(buf, k[:]...)
		for _, x := range vecs[i] {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
		}
	}
	if len(buf) == 0 {
		return nil
	}
	_, err := c.f.Write(buf)
	return err
}

// Close closes the file.
func (c *VecCache) Close() error { return c.f.Close() }
