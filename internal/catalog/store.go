package catalog

import (
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// store keeps full tool definitions out of the heap. A definition is two
// JSON blobs, its input schema and the rest (name, description, annotations,
// output schema, _meta), each stored once per distinct content: a hundred
// tools sharing a schema share one blob. Blobs live in an append-only file
// in the state folder, or in memory as JSON bytes when there is none (still
// a tenth of the decoded maps). A few hundred decoded definitions are kept,
// most recently used first, for the tools search returns and calls use.
//
// The file belongs to one process: it is created afresh when the catalogue
// opens (the catalogue is rebuilt from the upstreams and the catalogue
// cache at each start) and unlinked at once where the system allows, so a
// crash leaves nothing behind. Blobs no tool refers to any more are
// counted, and the file is rewritten with the live ones when they pass
// half of it: it never grows past about twice what is live.
type store struct {
	log *slog.Logger

	mu    sync.RWMutex
	f     *os.File // nil: blobs in memory
	dir   string
	path  string // the file's name while it is not unlinked
	end   int64
	dead  int64
	blobs map[[32]byte]*blob

	cmu   sync.Mutex
	lru   *list.List // of *cached, most recent first
	index map[defKey]*list.Element
}

// blob is one stored JSON value.
type blob struct {
	off  int64
	n    int32
	refs int32
	mem  []byte // the bytes, when the store has no file
	sum  [32]byte
}

type defKey struct{ rest, schema *blob }

type cached struct {
	key defKey
	def *mcp.Tool
}

// decodedCacheSize is how many decoded definitions the store keeps: enough
// for every tool a burst of searches returns and its calls use.
const decodedCacheSize = 512

// compactMin is the garbage (bytes) below which the file is never
// rewritten (a variable for tests).
var compactMin int64 = 4 << 20

func newStore(dir string, log *slog.Logger) (*store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &store{log: log, dir: dir, blobs: map[[32]byte]*blob{}, lru: list.New(), index: map[defKey]*list.Element{}}
	if dir == "" {
		return s, nil
	}
	f, path, err := createStoreFile(dir)
	if err != nil {
		return nil, err
	}
	s.f, s.path = f, path
	return s, nil
}

// createStoreFile creates a store file in dir and unlinks it while open
// where the system allows it; path is its name when it could not be
// unlinked (Windows), to remove it on close.
func createStoreFile(dir string) (f *os.File, path string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("catalog: tool definition store: %v", err)
	}
	f, err = os.CreateTemp(dir, "tooldefs-*")
	if err != nil {
		return nil, "", fmt.Errorf("catalog: tool definition store: %v", err)
	}
	if os.Remove(f.Name()) != nil {
		path = f.Name()
	}
	return f, path, nil
}

// ref is a stored definition.
type ref struct{ rest, schema *blob }

// put stores def, its input schema given as JSON, and returns its
// reference. The definition is not kept.
func (s *store) put(def *mcp.Tool, schema []byte) (ref, error) {
	d := *def
	d.InputSchema = nil
	rest, err := json.Marshal(&d)
	if err != nil {
		return ref{}, fmt.Errorf("definition: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := ref{}
	if r.schema, err = s.addLocked(schema); err != nil {
		return ref{}, err
	}
	if r.rest, err = s.addLocked(rest); err != nil {
		s.releaseLocked(r.schema)
		return ref{}, err
	}
	return r, nil
}

func (s *store) addLocked(b []byte) (*blob, error) {
	sum := sha256.Sum256(b)
	if bl, ok := s.blobs[sum]; ok {
		if bl.refs == 0 {
			s.dead -= int64(bl.n)
		}
		bl.refs++
		return bl, nil
	}
	bl := &blob{n: int32(len(b)), refs: 1, sum: sum}
	if s.f == nil {
		bl.mem = b
	} else {
		if _, err := s.f.WriteAt(b, s.end); err != nil {
			return nil, fmt.Errorf("catalog: tool definition store: %v", err)
		}
		bl.off = s.end
		s.end += int64(len(b))
	}
	s.blobs[sum] = bl
	return bl, nil
}

// release drops a reference; blobs nobody refers to become garbage.
func (s *store) release(r ref) {
	if r.rest == nil {
		return
	}
	s.mu.Lock()
	s.releaseLocked(r.rest)
	s.releaseLocked(r.schema)
	s.maybeCompactLocked()
	s.mu.Unlock()
	s.cmu.Lock()
	if e, ok := s.index[defKey(r)]; ok && r.rest.refs == 0 {
		s.lru.Remove(e)
		delete(s.index, defKey(r))
	}
	s.cmu.Unlock()
}

func (s *store) releaseLocked(b *blob) {
	b.refs--
	if b.refs > 0 {
		return
	}
	delete(s.blobs, b.sum)
	if s.f == nil {
		b.mem = nil
		return
	}
	s.dead += int64(b.n)
}

// maybeCompactLocked rewrites the file with the live blobs once garbage
// is more than half of it. On failure the old file stays in use.
func (s *store) maybeCompactLocked() {
	if s.f == nil || s.dead < compactMin || s.dead*2 < s.end {
		return
	}
	nf, npath, err := createStoreFile(s.dir)
	if err != nil {
		s.log.Warn("tool definition store: compaction failed; the file keeps growing until it succeeds", "error", err)
		return
	}
	var end int64
	offs := make(map[*blob]int64, len(s.blobs))
	var buf []byte
	for _, b := range s.blobs {
		if cap(buf) < int(b.n) {
			buf = make([]byte, b.n)
		}
		buf = buf[:b.n]
		_, err := s.f.ReadAt(buf, b.off)
		if err == nil {
			_, err = nf.WriteAt(buf, end)
		}
		if err != nil {
			nf.Close()
			if npath != "" {
				os.Remove(npath)
			}
			s.log.Warn("tool definition store: compaction failed; the file keeps growing until it succeeds", "error", err)
			return
		}
		offs[b] = end
		end += int64(b.n)
	}
	for b, off := range offs {
		b.off = off
	}
	s.f.Close()
	if s.path != "" {
		os.Remove(s.path)
	}
	s.f, s.path, s.end, s.dead = nf, npath, end, 0
}

func (s *store) read(b *blob) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.f == nil {
		if b.mem == nil {
			return nil, fmt.Errorf("catalog: definition no longer stored")
		}
		return b.mem, nil
	}
	if b.refs == 0 {
		return nil, fmt.Errorf("catalog: definition no longer stored")
	}
	buf := make([]byte, b.n)
	if _, err := s.f.ReadAt(buf, b.off); err != nil {
		return nil, fmt.Errorf("catalog: tool definition store: %v", err)
	}
	return buf, nil
}

// get returns the definition r refers to, decoded; callers must not
// modify it.
func (s *store) get(r ref) (*mcp.Tool, error) {
	k := defKey(r)
	s.cmu.Lock()
	if e, ok := s.index[k]; ok {
		s.lru.MoveToFront(e)
		d := e.Value.(*cached).def
		s.cmu.Unlock()
		return d, nil
	}
	s.cmu.Unlock()
	rest, err := s.read(r.rest)
	if err != nil {
		return nil, err
	}
	schema, err := s.read(r.schema)
	if err != nil {
		return nil, err
	}
	d := &mcp.Tool{}
	if err := json.Unmarshal(rest, d); err != nil {
		return nil, fmt.Errorf("catalog: stored definition: %v", err)
	}
	// Decoded as a client decodes an upstream's list: objects are maps.
	var sch any
	if err := json.Unmarshal(schema, &sch); err != nil {
		return nil, fmt.Errorf("catalog: stored input schema: %v", err)
	}
	d.InputSchema = sch
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if e, ok := s.index[k]; ok {
		return e.Value.(*cached).def, nil
	}
	s.index[k] = s.lru.PushFront(&cached{key: k, def: d})
	if s.lru.Len() > decodedCacheSize {
		last := s.lru.Back()
		s.lru.Remove(last)
		delete(s.index, last.Value.(*cached).key)
	}
	return d, nil
}

// size is the bytes stored (live and garbage) and the number of blobs.
func (s *store) size() (bytes, dead int64, blobs int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.f == nil {
		for _, b := range s.blobs {
			bytes += int64(b.n)
		}
		return bytes, 0, len(s.blobs)
	}
	return s.end, s.dead, len(s.blobs)
}

func (s *store) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	if s.path != "" {
		os.Remove(s.path)
	}
	return err
}
