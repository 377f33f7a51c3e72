package pin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
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
	// definition, as catalog.DefinitionHash); "" when the tool was seen
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

// Path is the pin file's path ("" for a memory store).
func (s *Store) Path() string {
	if s.dir == "" {
		return ""
	}
	return filepath.Join(s.dir, FileName)
}

// Read returns the pin file as it is on disk (a fresh copy each time). A
// missing file is an empty one.
func (s *Store) Read() (*File, error) {
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
	f := newFile()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(f); err != nil {
		return nil, st, fmt.Errorf("pins %s: %v (fix or move the file aside; every tool will then be pinned anew)", path, err)
	}
	if f.Version != FormatVersion {
		return nil, st, fmt.Errorf("pins %s: format version %d, want %d", path, f.Version, FormatVersion)
	}
	if f.Tools == nil {
		f.Tools = map[string]map[string]*ToolPin{}
	}
	if f.Binaries == nil {
		f.Binaries = map[string]*BinaryPin{}
	}
	return f, st, nil
}

// Update applies fn to a fresh copy of the pin file under the lock and
// writes the result if fn reports a change. fn's error aborts the update.
func (s *Store) Update(fn func(f *File) (changed bool, err error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
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
