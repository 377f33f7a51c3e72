package pin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/state"
)

// FileName is the pin file's name in the state directory.
const FileName = "pins.json"

// FormatVersion is the version of the pin file's format.
const FormatVersion = 1

// File is the pin file: every pinned tool definition and server
// executable. Tools maps server → tool → pin.
type File struct {
	Version  int                            `json:"version"`
	Tools    map[string]map[string]*ToolPin `json:"tools"`
	Binaries map[string]*BinaryPin          `json:"binaries,omitempty"`
}

// ToolPin is one tool's trusted definition, and the latest different one
// seen, if any.
type ToolPin struct {
	// Hash is the trusted definition hash (hex SHA-256 of the canonical
	// definition, as extension.DefinitionHash); "" when the tool was seen
	// but never trusted (auto_trust_first off).
	Hash string `json:"hash,omitempty"`
	// Definition is the trusted definition in canonical JSON, when known
	// (a pin made with `pins trust --hash` of an unseen definition has
	// none).
	Definition json.RawMessage `json:"definition,omitempty"`
	PinnedAt   *time.Time      `json:"pinned_at,omitempty"`
	// Observed is the latest definition seen that differs from the pin.
	Observed *Observation `json:"observed,omitempty"`
}

// Observation is a definition seen that is not the pinned one.
type Observation struct {
	Hash       string          `json:"hash"`
	Definition json.RawMessage `json:"definition,omitempty"`
	SeenAt     time.Time       `json:"seen_at"`
}

// BinaryPin is a stdio server's executable: the absolute path launched and
// the SHA-256 of its content.
type BinaryPin struct {
	// Command is the configured command the pin was made for.
	Command  string     `json:"command,omitempty"`
	Path     string     `json:"path,omitempty"`
	Hash     string     `json:"hash,omitempty"`
	PinnedAt *time.Time `json:"pinned_at,omitempty"`
	// Observed is the latest executable seen that differs from the pin.
	Observed *BinaryObservation `json:"observed,omitempty"`
}

// BinaryObservation is an executable seen that is not the pinned one.
type BinaryObservation struct {
	Command string    `json:"command,omitempty"`
	Path    string    `json:"path"`
	Hash    string    `json:"hash"`
	SeenAt  time.Time `json:"seen_at"`
}

// Pin statuses.
const (
	StatusMatch     = "match"
	StatusMismatch  = "mismatch"
	StatusNotPinned = "not_pinned"
)

// Status says how the latest definition seen relates to the pin.
func (p *ToolPin) Status() string {
	switch {
	case p == nil || p.Hash == "":
		return StatusNotPinned
	case p.Observed != nil && p.Observed.Hash != p.Hash:
		return StatusMismatch
	}
	return StatusMatch
}

// Status says how the latest executable seen relates to the pin.
func (p *BinaryPin) Status() string {
	switch {
	case p == nil || p.Hash == "":
		return StatusNotPinned
	case p.Observed != nil && p.Observed.Hash != p.Hash:
		return StatusMismatch
	}
	return StatusMatch
}

func newFile() *File {
	return &File{Version: FormatVersion, Tools: map[string]map[string]*ToolPin{}, Binaries: map[string]*BinaryPin{}}
}

// Tool returns the pin of server's tool, or nil.
func (f *File) Tool(server, tool string) *ToolPin { return f.Tools[server][tool] }

// SetTool stores p as server's tool's pin.
func (f *File) SetTool(server, tool string, p *ToolPin) {
	if f.Tools[server] == nil {
		f.Tools[server] = map[string]*ToolPin{}
	}
	f.Tools[server][tool] = p
}

// DeleteTool removes server's tool's pin and reports whether there was one.
func (f *File) DeleteTool(server, tool string) bool {
	if _, ok := f.Tools[server][tool]; !ok {
		return false
	}
	delete(f.Tools[server], tool)
	if len(f.Tools[server]) == 0 {
		delete(f.Tools, server)
	}
	return true
}

// ToolEntry is one tool pin with its names, for listing.
type ToolEntry struct {
	Server, Tool string
	*ToolPin
}

// ToolEntries lists every tool pin sorted by server then tool.
func (f *File) ToolEntries() []ToolEntry {
	var out []ToolEntry
	for s, tools := range f.Tools {
		for t, p := range tools {
			out = append(out, ToolEntry{s, t, p})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Server != out[j].Server {
			return out[i].Server < out[j].Server
		}
		return out[i].Tool < out[j].Tool
	})
	return out
}

// Store is the pin file in a state directory. Writers take an exclusive
// lock on a lock file beside it and replace the file atomically, so the
// gateway and the `toolgate pins` command can both change it; readers never
// see a half-written file. With an empty directory the store lives in
// memory only.
type Store struct {
	dir string
	// shared, when set, keeps the pin file in Redis for every replica (see
	// NewSharedStore); dir is then unused.
	shared *state.Backend
	dirty  atomic.Bool // another replica changed the pins since the last read
	sub    *redis.PubSub

	mu      sync.Mutex // serialises this process's writers; guards mem
	mem     *File
	cache   *File // last read, with the file's identity
	stamp   stamp
	checked time.Time // when the file was last looked at
}

// RecheckEvery is how long Current trusts what it last read before it
// looks at the file again: a call does not pay for a stat, and a change
// made by another process (`toolgate pins`) counts within this time.
const RecheckEvery = time.Second

type stamp struct {
	mod  time.Time
	size int64
	ino  uint64
	ok   bool
}

// NewStore returns the store in dir ("" for memory only). It does not touch
// the disk.
func NewStore(dir string) *Store { return &Store{dir: dir} }

// NewSharedStore returns the store in b's Redis: one JSON document that
// every replica reads, changed by optimistic transactions (WATCH/MULTI)
// and announced on a channel, so a `toolgate pins trust` on one replica,
// or a pin made by another, counts on all at the next call. Close stops
// listening.
func NewSharedStore(b *state.Backend) *Store {
	s := &Store{shared: b}
	s.dirty.Store(true)
	s.sub = b.Client.Subscribe(context.Background(), b.Key("pins", "changed"))
	ch := s.sub.Channel()
	go func() {
		for range ch {
			s.dirty.Store(true)
		}
	}()
	return s
}

// Close stops a shared store's listening; a no-op for a file store.
func (s *Store) Close() error {
	if s.sub != nil {
		return s.sub.Close()
	}
	return nil
}

// Path is the pin file's path ("" for a memory store).
func (s *Store) Path() string {
	if s.dir == "" || s.shared != nil {
		return ""
	}
	return filepath.Join(s.dir, FileName)
}

// Read returns the pin file as it is on disk (a fresh copy each time). A
// missing file is an empty one.
func (s *Store) Read() (*File, error) {
	if s.shared != nil {
		return s.readShared(context.Background())
	}
	if s.dir == "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		return clone(s.memFile())
	}
	f, _, err := s.read()
	return f, err
}

func (s *Store) memFile() *File {
	if s.mem == nil {
		s.mem = newFile()
	}
	return s.mem
}

// Current returns the pin file as read at most RecheckEvery ago,
// re-reading it only when it changed on disk. The result is shared:
// callers must not modify it.
func (s *Store) Current() (*File, error) { return s.current(false) }

// Latest is Current looking at the file now: for decisions that must see a
// change another process made a moment ago.
func (s *Store) Latest() (*File, error) { return s.current(true) }

func (s *Store) current(now bool) (*File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shared != nil {
		return s.currentShared(now)
	}
	if s.dir == "" {
		return s.memFile(), nil
	}
	t := time.Now()
	if age := t.Sub(s.checked); s.cache != nil && !now && age >= 0 && age < RecheckEvery {
		return s.cache, nil
	}
	st := statOf(s.Path())
	if s.cache != nil && st == s.stamp {
		s.checked = t
		return s.cache, nil
	}
	f, st, err := s.read()
	if err != nil {
		return nil, err
	}
	s.cache, s.stamp, s.checked = f, st, t
	return f, nil
}

func statOf(path string) stamp {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}
	}
	st := stamp{mod: fi.ModTime(), size: fi.Size(), ok: true}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st
}

func (s *Store) read() (*File, stamp, error) {
	path := s.Path()
	st := statOf(path)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return newFile(), stamp{}, nil
	}
	if err != nil {
		return nil, st, fmt.Errorf("pins: %v", err)
	}
	f, err := decode(data, path, "fix or move the file aside")
	return f, st, err
}

// decode parses a pin file read from where; fix says how to get past a
// corrupt one.
func decode(data []byte, where, fix string) (*File, error) {
	f := newFile()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(f); err != nil {
		return nil, fmt.Errorf("pins %s: %v (%s; every tool will then be pinned anew)", where, err, fix)
	}
	if f.Version != FormatVersion {
		return nil, fmt.Errorf("pins %s: format version %d, want %d", where, f.Version, FormatVersion)
	}
	if f.Tools == nil {
		f.Tools = map[string]map[string]*ToolPin{}
	}
	if f.Binaries == nil {
		f.Binaries = map[string]*BinaryPin{}
	}
	return f, nil
}

func (s *Store) sharedKey() string { return s.shared.Key("pins", "file") }

// readShared reads the pin file from Redis; a missing key is an empty file.
func (s *Store) readShared(ctx context.Context) (*File, error) {
	data, err := s.shared.Client.Get(ctx, s.sharedKey()).Bytes()
	if errors.Is(err, redis.Nil) {
		return newFile(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("pins: %w", s.shared.Err(err))
	}
	return decode(data, "in Redis key "+s.sharedKey(), "fix or delete the key")
}

// currentShared is current for a shared store; s.mu is held. What was read
// is trusted until another replica announces a change, and at most
// RecheckEvery in case an announcement was missed (a reconnect).
func (s *Store) currentShared(now bool) (*File, error) {
	t := time.Now()
	if age := t.Sub(s.checked); s.cache != nil && !now && !s.dirty.Load() && age >= 0 && age < RecheckEvery {
		return s.cache, nil
	}
	s.dirty.Store(false)
	f, err := s.readShared(context.Background())
	if err != nil {
		s.dirty.Store(true)
		return nil, err
	}
	s.cache, s.checked = f, t
	return f, nil
}

// updateShared is Update for a shared store; s.mu is held. A concurrent
// change by another replica makes the transaction fail and fn run again
// on what that replica wrote.
func (s *Store) updateShared(fn func(f *File) (bool, error)) error {
	ctx := context.Background()
	k := s.sharedKey()
	for attempt := range 50 {
		if attempt > 0 {
			// Writers that lost a transaction back off for a random,
			// growing while, so one busy writer cannot starve the others.
			time.Sleep(time.Duration(rand.Int64N(int64(min(attempt, 10)) * int64(time.Millisecond))))
		}
		var out *File
		var own error // fn's or the document's own error, not Redis'
		err := s.shared.Client.Watch(ctx, func(tx *redis.Tx) error {
			data, err := tx.Get(ctx, k).Bytes()
			f := newFile()
			switch {
			case errors.Is(err, redis.Nil):
			case err != nil:
				return err
			default:
				if f, own = decode(data, "in Redis key "+k, "fix or delete the key"); own != nil {
					return own
				}
			}
			changed, err := fn(f)
			if err != nil || !changed {
				own = err
				return err
			}
			b, err := json.Marshal(f)
			if err != nil {
				own = err
				return err
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, k, b, 0)
				p.Publish(ctx, s.shared.Key("pins", "changed"), "1")
				return nil
			})
			out = f
			return err
		}, k)
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		if own != nil {
			return own
		}
		if err != nil {
			return fmt.Errorf("pins: %w", s.shared.Err(err))
		}
		if out != nil {
			s.cache, s.checked = out, time.Now()
		}
		return nil
	}
	return errors.New("pins: too many concurrent changes in Redis; try again")
}

// Update applies fn to a fresh copy of the pin file under the lock and
// writes the result if fn reports a change. fn's error aborts the update.
func (s *Store) Update(fn func(f *File) (changed bool, err error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shared != nil {
		return s.updateShared(fn)
	}
	if s.dir == "" {
		f, _ := clone(s.memFile())
		changed, err := fn(f)
		if err == nil && changed {
			s.mem = f
		}
		return err
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("pins: %v", err)
	}
	lock, err := os.OpenFile(s.Path()+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("pins: %v", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("pins: lock: %v", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	f, _, err := s.read()
	if err != nil {
		return err
	}
	changed, err := fn(f)
	if err != nil || !changed {
		return err
	}
	if err := s.write(f); err != nil {
		return err
	}
	s.cache, s.stamp, s.checked = f, statOf(s.Path()), time.Now()
	return nil
}

func (s *Store) write(f *File) error {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("pins: %v", err)
	}
	tmp, err := os.CreateTemp(s.dir, FileName+".tmp-*")
	if err != nil {
		return fmt.Errorf("pins: %v", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("pins: %v", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("pins: %v", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("pins: %v", err)
	}
	if err := os.Rename(tmp.Name(), s.Path()); err != nil {
		return fmt.Errorf("pins: %v", err)
	}
	return nil
}

func clone(f *File) (*File, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	out := newFile()
	if err := json.Unmarshal(b, out); err != nil {
		return nil, err
	}
	if out.Tools == nil {
		out.Tools = map[string]map[string]*ToolPin{}
	}
	if out.Binaries == nil {
		out.Binaries = map[string]*BinaryPin{}
	}
	return out, nil
}

// Canonical is a tool definition in the canonical JSON that
// DefinitionHash hashes (extension.CanonicalDefinition).
func Canonical(d *mcp.Tool) json.RawMessage { return extension.CanonicalDefinition(d) }

// Hash is a tool definition's hash (extension.DefinitionHash).
func Hash(d *mcp.Tool) string { return extension.DefinitionHash(d) }

// HashBytes is the hex SHA-256 of b.
func HashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// NormalizeHash accepts a hash as hex, optionally prefixed "sha256:", and
// returns it as lower-case hex.
func NormalizeHash(h string) (string, error) {
	h = strings.ToLower(strings.TrimSpace(h))
	h = strings.TrimPrefix(h, "sha256:")
	if len(h) != 64 {
		return "", fmt.Errorf("hash %q: want 64 hex digits (a SHA-256), optionally prefixed \"sha256:\"", h)
	}
	if _, err := hex.DecodeString(h); err != nil {
		return "", fmt.Errorf("hash %q: not hex", h)
	}
	return h, nil
}
