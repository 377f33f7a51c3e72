package search

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
)

// lexCacheVersion names the analysis a cache file holds. Bump it whenever
// Tokenize, the stopwords, the stemmer or analyse change what terms a
// document yields: a file of another version is ignored.
const lexCacheVersion = 1

// lexCache keeps the lexical index's analysed documents (terms and their
// weighted frequencies) in a file in the state folder, so a restart over
// the same catalogue does not tokenise and stem every tool again: that was
// the largest cost of a warm restart at 20,000 tools. Each server's entry
// carries a hash of the text analysed; a server whose tools changed is
// analysed afresh. The file is written when the index is closed, from the
// posting lists, and holds only the servers indexed at that time.
type lexCache struct {
	path string
	once sync.Once
	mu   sync.Mutex
	// loaded holds the file's entries not used yet, by server; an entry is
	// dropped when a Set of its server consumes it.
	loaded map[string]lexCacheServer
	terms  []string // what the loaded entries' term IDs index
}

type lexCacheFile struct {
	Version int
	Terms   []string
	Servers []lexCacheServer
}

type lexCacheServer struct {
	Name string
	Hash [32]byte
	Docs []lexCacheDoc
}

type lexCacheDoc struct {
	Len   float64
	Terms []uint32 // indexes into lexCacheFile.Terms
	TFs   []float32
}

// Persist keeps the index's analysed documents in path: read on the first
// Set, written by Close. A missing, unreadable or outdated file means the
// documents are analysed as without it.
func (l *Lexical) Persist(path string) {
	l.cache = &lexCache{path: path}
}

// Close writes the analysed documents to the file given to Persist, if any.
func (l *Lexical) Close() error {
	if l.cache == nil {
		return nil
	}
	return l.cache.save(l)
}

// docsHash is the hash of what analyse reads from docs, with the analysis
// version and field weights, so a change to either misses the cache.
func docsHash(docs []Doc) [32]byte {
	h := sha256.New()
	var n [8]byte
	str := func(s string) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	str(fmt.Sprint(lexCacheVersion, nameWeight, paramWeight, len(docs)))
	for _, d := range docs {
		str(d.ID)
		str(d.Name)
		str(d.Server)
		str(d.Description)
		binary.LittleEndian.PutUint64(n[:], uint64(len(d.Params)))
		h.Write(n[:])
		for _, p := range d.Params {
			str(p.Name)
			str(p.Description)
		}
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// take returns the cached analysis of server's docs when the file holds
// one for exactly this text, and forgets it either way.
func (c *lexCache) take(server string, docs []Doc, hash [32]byte) ([]lexDoc, bool) {
	c.once.Do(c.load)
	c.mu.Lock()
	e, ok := c.loaded[server]
	delete(c.loaded, server)
	dict := c.terms
	if len(c.loaded) == 0 {
		c.terms = nil // every entry used: let the dictionary go
	}
	c.mu.Unlock()
	if !ok || e.Hash != hash || len(e.Docs) != len(docs) {
		return nil, false
	}
	out := make([]lexDoc, len(docs))
	for i, cd := range e.Docs {
		terms := make([]string, len(cd.Terms))
		for j, t := range cd.Terms {
			terms[j] = dict[t]
		}
		out[i] = lexDoc{id: docs[i].ID, len: cd.Len, terms: terms, tfs: cd.TFs}
	}
	return out, true
}

func (c *lexCache) load() {
	c.loaded = map[string]lexCacheServer{}
	f, err := os.Open(c.path)
	if err != nil {
		return
	}
	defer f.Close()
	var file lexCacheFile
	if err := gob.NewDecoder(bufio.NewReader(f)).Decode(&file); err != nil || file.Version != lexCacheVersion {
		return
	}
	// Resolve term IDs to strings once, here, and check them: a damaged
	// file must not index out of range later.
	for _, s := range file.Servers {
		for _, d := range s.Docs {
			if len(d.Terms) != len(d.TFs) || math.IsNaN(d.Len) {
				c.loaded = map[string]lexCacheServer{}
				return
			}
			for _, t := range d.Terms {
				if int(t) >= len(file.Terms) {
					c.loaded = map[string]lexCacheServer{}
					return
				}
			}
		}
		c.loaded[s.Name] = s
	}
	c.terms = file.Terms
}

// save writes the index's documents, rebuilt from the posting lists, to
// the cache file (through a temporary file, so a reader never sees half).
func (c *lexCache) save(l *Lexical) error {
	l.mu.RLock()
	file := lexCacheFile{Version: lexCacheVersion, Terms: make([]string, 0, len(l.postings))}
	docs := make([]lexCacheDoc, len(l.ids))
	for t, p := range l.postings {
		id := uint32(len(file.Terms))
		file.Terms = append(file.Terms, t)
		for _, x := range p {
			d := &docs[x.doc]
			d.Terms = append(d.Terms, id)
			d.TFs = append(d.TFs, x.tf)
		}
	}
	for server, slots := range l.byServer {
		hash, ok := l.hashes[server]
		if !ok {
			continue
		}
		e := lexCacheServer{Name: server, Hash: hash, Docs: make([]lexCacheDoc, len(slots))}
		for i, s := range slots {
			e.Docs[i] = docs[s]
			e.Docs[i].Len = float64(l.lens[s])
		}
		file.Servers = append(file.Servers, e)
	}
	l.mu.RUnlock()
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return fmt.Errorf("lexical cache: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), filepath.Base(c.path)+".tmp*")
	if err != nil {
		return fmt.Errorf("lexical cache: %w", err)
	}
	w := bufio.NewWriter(tmp)
	err = gob.NewEncoder(w).Encode(&file)
	if err == nil {
		err = w.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), c.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("lexical cache %s: %w", c.path, err)
	}
	return nil
}
