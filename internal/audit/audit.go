// Package audit is toolgate's record: an append-only JSON-lines log of
// every decision and detection, each record chained to the one before by a
// SHA-256 hash so that an edited, removed, inserted or reordered record is
// caught by Verify.
//
// Several processes may append to one log (a serve beside one-off commands,
// or two gateways on one state folder): every append takes an exclusive
// flock on PATH.lock, re-reads the chain's tail if another process wrote
// since, and continues from there. The last sequence number and hash are
// kept in a checkpoint (PATH.checkpoint, rewritten whole under the same
// lock) so that a removed tail, an emptied or a deleted log is caught too.
// Within a process, appends that arrive together commit together (one
// flock and one check of the file), each record followed by its
// checkpoint. The log rotates by size into PATH.<first seq>, the chain continuing
// across files.
//
// Append returns only after the record and its checkpoint reached the
// kernel (enough for kill -9) or, with sync on, the disk.
package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/extension"
)

// Event types; those extensions emit are defined in package extension.
const (
	ToolSeen             = extension.EventToolSeen
	ToolChanged          = extension.EventToolChanged
	ToolCalled           = extension.EventToolCalled
	ToolCallIntercepted  = extension.EventToolCallIntercepted
	CrossServerBlocked   = extension.EventCrossServerBlocked
	Detection            = extension.EventDetection
	ServerNameSimilar    = extension.EventServerNameSimilar
	OutputInspection     = extension.EventOutputInspection
	ServerBinaryMismatch = extension.EventServerBinaryMismatch
	ServerLoaded         = extension.EventServerLoaded
	ServerLoadDenied     = extension.EventServerLoadDenied
	Search               = extension.EventSearch
	// NetworkConnection is one connection a stdio server made or tried
	// through its egress proxy (the name agentsh gives it).
	NetworkConnection = "mcp_network_connection"
)

// Event is one record. Fields holds what is specific to the type (hashes,
// rule, severity, detections...). Argument values never go in an event
// unless the operator asked for them; ArgsHash identifies them instead.
type Event struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Session string    `json:"session,omitempty"`
	// Principal is who made the request (see extension.Principal.ID):
	// empty over stdio or without auth.
	Principal string `json:"principal,omitempty"`
	// Replica names the gateway replica that wrote the record, when
	// replicas share state (state.replica); each keeps its own chain.
	Replica string         `json:"replica,omitempty"`
	Server  string         `json:"server,omitempty"`
	Tool    string         `json:"tool,omitempty"`
	Action  string         `json:"action,omitempty"`
	Reason  string         `json:"reason,omitempty"`
	Fields  map[string]any `json:"fields,omitempty"`
	Prev    string         `json:"prev"`
	Hash    string         `json:"hash"`
}

// genesis is the Prev of the first record.
const genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// Rotation defaults: 8 files of at most 64 MiB bound the log to 512 MiB.
const (
	DefaultMaxSize  = 64 << 20
	DefaultMaxFiles = 8
)

// Head is the last record of the chain as this process last saw it: its
// sequence number and hash, the figures a monitor can compare over time.
type Head struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

// Log is an open audit log. It is safe for concurrent use, by goroutines
// and by processes.
type Log struct {
	path     string
	sync     bool
	redact   func(string) string
	maxSize  int64
	maxFiles int
	log      *slog.Logger
	onAppend func([]byte)

	// qmu guards queue: the records waiting for the next commit.
	qmu   sync.Mutex
	queue []*pending
	spare []*pending // the previous batch's slice, reused

	mu  sync.Mutex     // one commit at a time in this process; the flock orders processes
	pst syscall.Stat_t // the path's stat in catchUp, reused
	// commits counts the batches written (for tests).
	commits int
	lock    *os.File    // PATH.lock, flocked around every append
	ck      *os.File    // PATH.checkpoint
	f       *os.File    // the current file, O_APPEND
	fst     os.FileInfo // f's identity, to tell whether the path still names it
	end     int64       // f's size after this process's last write; -1 when unknown
	seq     uint64
	prev    string
	// first is the sequence number of the oldest record kept (rotation
	// deletes older files), recorded in the checkpoint.
	first uint64
	head  atomic.Pointer[Head]
	line  []byte // the record being written, reused
	// tailBuf holds the last record read by catchUp, reused: another
	// process's append makes every catchUp read one.
	tailBuf []byte
	ckbuf   [checkpointSize]byte // the checkpoint being written
}

// maxPooled is the largest buffer kept for reuse: one huge record does not
// pin its memory.
const maxPooled = 64 << 10

// Options configure Open.
type Options struct {
	// NoSync skips fsync: records still reach the kernel before Append
	// returns (enough for kill -9), but not the disk.
	NoSync bool
	// Redact is applied to every string of an event, keys included, before
	// it is written.
	Redact func(string) string
	// MaxSize is the size in bytes past which the log rotates
	// (0: DefaultMaxSize; negative: never).
	MaxSize int64
	// MaxFiles is how many files are kept, the current one included
	// (0: DefaultMaxFiles). The oldest are deleted.
	MaxFiles int
	// Logger receives warnings (nil: slog.Default()).
	Logger *slog.Logger
	// OnAppend, if set, is handed every record line this process writes
	// (newline included; the slice is its own), in chain order, once the
	// record is in the file. It must not block.
	OnAppend func(line []byte)
}

// Open opens (creating if needed) the log at path and continues its chain.
// A log whose last record is damaged, or that disagrees with its
// checkpoint (a removed tail, an emptied or replaced file), is an error:
// continuing it would hide what happened.
func Open(path string, opts Options) (*Log, error) {
	if opts.MaxSize == 0 {
		opts.MaxSize = DefaultMaxSize
	}
	if opts.MaxFiles <= 0 {
		opts.MaxFiles = DefaultMaxFiles
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit: %v", err)
	}
	lock, err := os.OpenFile(lockPath(path), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: %v", err)
	}
	l := &Log{path: path, sync: !opts.NoSync, redact: opts.Redact, maxSize: opts.MaxSize, maxFiles: opts.MaxFiles,
		log: opts.Logger, onAppend: opts.OnAppend, lock: lock, end: -1, prev: genesis, first: 1}
	if err := flock(lock, syscall.LOCK_EX); err != nil {
		lock.Close()
		return nil, err
	}
	if l.ck, err = os.OpenFile(checkpointPath(path), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		flock(lock, syscall.LOCK_UN)
		lock.Close()
		return nil, fmt.Errorf("audit: %v", err)
	}
	defer flock(lock, syscall.LOCK_UN)
	if _, err := l.catchUp(true); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// Path is the log file's path.
func (l *Log) Path() string { return l.path }

// Head is the chain's last record as this process last saw it.
func (l *Log) Head() Head {
	if h := l.head.Load(); h != nil {
		return *h
	}
	return Head{}
}

// pending is a record waiting in the queue, and then its outcome.
type pending struct {
	body []byte
	err  error
	done bool
}

var pendingPool = sync.Pool{New: func() any { return new(pending) }}

// Append writes e as the next record, filling Seq, Time (if zero), Prev and
// Hash, and returns once it is written (durable with sync on). Every
// string is redacted first, so no caller can write a secret in clear.
//
// Appends from several goroutines commit together: a record joins the
// queue, and whichever caller holds the commit lock next writes every
// queued record under one flock and one check of the file, then the
// others find theirs written (or its error) and return. Each record is
// still followed by its checkpoint, so a process stopped at any point
// leaves at most one record past the checkpoint, as before.
func (l *Log) Append(e Event) error {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	// Redacted and encoded before the lock: only seq, prev and the hash
	// depend on the chain.
	bp := bodyPool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooled {
			bodyPool.Put(bp)
		}
	}()
	body, err := l.encodeBody((*bp)[:0], &e)
	if err != nil {
		return err
	}
	*bp = body

	p := pendingPool.Get().(*pending)
	*p = pending{body: body}
	l.qmu.Lock()
	l.queue = append(l.queue, p)
	l.qmu.Unlock()

	l.mu.Lock()
	if !p.done {
		// Not written by an earlier commit: commit the queue, this
		// record and those that joined while the lock was held.
		l.qmu.Lock()
		batch := l.queue
		l.queue = l.spare[:0]
		l.qmu.Unlock()
		l.commit(batch)
		clear(batch)
		l.spare = batch
	}
	l.mu.Unlock()
	err = p.err
	*p = pending{}
	pendingPool.Put(p)
	return err
}

// commit writes a batch of records in order, under one flock, and sets
// each one's outcome. Called with mu held.
func (l *Log) commit(batch []*pending) {
	if l.f == nil {
		failed(batch, errors.New("audit: the log is closed"))
		return
	}
	if err := flock(l.lock, syscall.LOCK_EX); err != nil {
		failed(batch, err)
		return
	}
	defer flock(l.lock, syscall.LOCK_UN)
	size, err := l.catchUp(false)
	if err != nil {
		failed(batch, err)
		return
	}
	l.commits++
	for i, p := range batch {
		if size, err = l.write(p.body, size); err != nil {
			// The file's state is unknown past a failure: the rest of
			// the batch fails too, and the next append starts afresh.
			failed(batch[i:], err)
			break
		}
		p.done = true
	}
	if batch[0].err == nil {
		l.head.Store(&Head{Seq: l.seq, Hash: l.prev})
	}
}

// failed sets err as the outcome of every record of batch.
func failed(batch []*pending, err error) {
	for _, p := range batch {
		p.err, p.done = err, true
	}
}

// write appends one record (body from encodeBody) to a file of size
// bytes, then its checkpoint, and returns the file's new size. Called
// with mu and the flock held, after catchUp.
func (l *Log) write(body []byte, size int64) (int64, error) {
	seq := l.seq + 1
	line, hash := appendLine(l.line[:0], seq, body, l.prev)
	if cap(line) <= maxPooled {
		l.line = line
	} else {
		l.line = nil
	}
	var drop []string
	if l.maxSize > 0 && size > 0 && size+int64(len(line)) > l.maxSize {
		var err error
		if drop, err = l.rotate(seq); err != nil {
			return 0, err
		}
		size = 0
	}
	if n, err := l.f.Write(line); err != nil {
		// Take back a partial line: a torn record would stop every
		// later append and open.
		if n > 0 {
			_ = l.f.Truncate(size)
		}
		l.end = -1
		return 0, fmt.Errorf("audit: write %s: %v", l.path, err)
	}
	size += int64(len(line))
	l.end = size
	if l.sync {
		if err := l.f.Sync(); err != nil {
			l.end = -1
			return 0, fmt.Errorf("audit: sync %s: %v", l.path, err)
		}
	}
	l.seq, l.prev = seq, hash
	if err := writeCheckpoint(l.ck, &l.ckbuf, checkpoint{Seq: l.seq, Hash: l.prev, First: l.first}, l.sync); err != nil {
		l.end = -1
		return 0, err
	}
	if l.onAppend != nil {
		l.onAppend(append([]byte(nil), line...))
	}
	// Deleted only now that the checkpoint no longer counts on them.
	for _, p := range drop {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.log.Warn("audit: remove rotated file", "path", p, "error", err)
		}
	}
	return size, nil
}

// catchUp brings the in-memory chain state up to the file, under the lock:
// another process may have appended or rotated since this one last wrote.
// It checks what it reads against the checkpoint and returns the current
// file's size.
func (l *Log) catchUp(opening bool) (int64, error) {
	// One stat of the path: still the file open here (not rotated by
	// another process, moved or deleted) and the size this process left it
	// at, so nobody else wrote and the tail is ours. Another process that
	// wrote leaves the same file larger: its size is the stat's, and only
	// the last record is read. (syscall.Stat into a reused buffer: os.Stat
	// allocates.)
	size, same := int64(-1), false
	if l.fst != nil {
		if fst, ok := l.fst.Sys().(*syscall.Stat_t); ok && syscall.Stat(l.path, &l.pst) == nil &&
			l.pst.Dev == fst.Dev && l.pst.Ino == fst.Ino {
			if l.pst.Size == l.end {
				return l.end, nil
			}
			size, same = l.pst.Size, true
		}
	}
	if !same {
		if err := l.reopenIfMoved(); err != nil {
			return 0, err
		}
		st, err := l.f.Stat()
		if err != nil {
			return 0, fmt.Errorf("audit: %v", err)
		}
		if size = st.Size(); size == l.end {
			return l.end, nil // nobody else wrote: the tail is ours
		}
	}
	tail, tailFile, err := lastRecord(l.path, l.f, size, &l.tailBuf)
	if err != nil {
		return 0, err
	}
	if err := l.reopenCheckpoint(); err != nil {
		return 0, err
	}
	ck, err := l.readCheckpoint()
	if err != nil {
		return 0, err
	}
	seq, hash := uint64(0), genesis
	if tail != nil {
		seq, hash = tail.Seq, tail.Hash
	}
	switch {
	case ck == nil && tail == nil:
		l.first = 1
	case ck == nil:
		if !opening {
			return 0, fmt.Errorf("audit: %s was removed while the log was in use; run `toolgate audit verify`", checkpointPath(l.path))
		}
		// A log written before checkpoints existed: anchor it from here.
		first, err := firstSeq(l.path)
		if err != nil {
			return 0, err
		}
		l.first = first
		if err := writeCheckpoint(l.ck, &l.ckbuf, checkpoint{Seq: seq, Hash: hash, First: first}, l.sync); err != nil {
			return 0, err
		}
		l.log.Warn("audit: the log had no checkpoint; one was created at its current end (records removed from its end before now cannot be detected)", "path", l.path, "seq", seq)
	case ck.Seq == seq && ck.Hash == hash,
		// The record was written but the process stopped before its
		// checkpoint: the record links to the checkpoint, so nothing is lost.
		tail != nil && ck.Seq+1 == seq && ck.Hash == tail.Prev:
		l.first = ck.First
	default:
		where := l.path
		if tailFile != "" {
			where = tailFile
		}
		return 0, fmt.Errorf("audit: %s ends at seq %d (hash %.12s) but %s says seq %d (hash %.12s): records were removed or the file was replaced "+
			"(or, with fsync off, the machine stopped before they reached the disk); "+
			"run `toolgate audit verify`, and to start a new chain move the log files and the checkpoint aside",
			where, seq, hash, checkpointPath(l.path), ck.Seq, ck.Hash)
	}
	l.seq, l.prev, l.end = seq, hash, size
	l.head.Store(&Head{Seq: seq, Hash: hash})
	return size, nil
}

// readCheckpoint reads the checkpoint through the open file (reopened by
// reopenCheckpoint if the path names another): no open and close per
// append. A file larger than a checkpoint is left to readCheckpoint.
func (l *Log) readCheckpoint() (*checkpoint, error) {
	var buf [checkpointSize + 1]byte
	n, err := l.ck.ReadAt(buf[:], 0)
	if err != nil && !errors.Is(err, io.EOF) || n > checkpointSize {
		return readCheckpoint(l.path)
	}
	return parseCheckpoint(l.path, buf[:n])
}

// reopenIfMoved reopens the path when the open file is no longer there
// (another process rotated it, or it was deleted).
func (l *Log) reopenIfMoved() error {
	pst, err := os.Stat(l.path)
	if err == nil {
		fst, ferr := l.f.Stat()
		if ferr == nil && os.SameFile(pst, fst) {
			return nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("audit: %v", err)
	}
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("audit: %v", err)
	}
	fst, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit: %v", err)
	}
	if l.f != nil {
		l.f.Close()
	}
	l.f, l.fst, l.end = f, fst, -1
	return nil
}

// reopenCheckpoint makes sure the checkpoint written is the one at the
// path (it may have been deleted or replaced since it was opened).
func (l *Log) reopenCheckpoint() error {
	p := checkpointPath(l.path)
	if pst, err := os.Stat(p); err == nil {
		if fst, err := l.ck.Stat(); err == nil && os.SameFile(pst, fst) {
			return nil
		}
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit: %v", err)
	}
	l.ck.Close()
	l.ck = f
	return nil
}

// rotate moves the current file to PATH.<its first seq>, starts a new one,
// and returns the oldest files past MaxFiles, to delete once the checkpoint
// is written. next is the sequence number about to be written.
func (l *Log) rotate(next uint64) ([]string, error) {
	first, err := firstSeqOf(l.path)
	if err != nil {
		return nil, err
	}
	if l.sync {
		if err := l.f.Sync(); err != nil {
			return nil, fmt.Errorf("audit: sync %s: %v", l.path, err)
		}
	}
	name := rotatedName(l.path, first)
	if _, err := os.Lstat(name); err == nil {
		return nil, fmt.Errorf("audit: cannot rotate %s: %s exists", l.path, name)
	}
	if err := os.Rename(l.path, name); err != nil {
		return nil, fmt.Errorf("audit: rotate: %v", err)
	}
	if err := l.reopenIfMoved(); err != nil {
		return nil, err
	}
	rotated, err := rotatedFiles(l.path)
	if err != nil {
		return nil, err
	}
	keep := l.maxFiles - 1
	if len(rotated) <= keep {
		return nil, nil
	}
	drop := rotated[:len(rotated)-keep]
	if keep == 0 {
		l.first = next
	} else {
		l.first = rotated[len(rotated)-keep].first
	}
	out := make([]string, len(drop))
	for i, r := range drop {
		out[i] = r.path
	}
	return out, nil
}

// Close closes the files.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.close()
}

func (l *Log) close() error {
	var err error
	if l.f != nil {
		err = l.f.Close()
		l.f = nil
	}
	if l.ck != nil {
		l.ck.Close()
		l.ck = nil
	}
	if l.lock != nil {
		l.lock.Close()
		l.lock = nil
	}
	return err
}

// hashSuffix is how every record ends: the hash is the last field, and
// the hash covers the record's bytes with that field empty.
const (
	emptyHash  = `"hash":""}`
	hashSuffix = len(`"hash":""}`) + 64
)

// rawHash checks a record's bytes (without the newline): it returns the
// hash the record states and the hash of its bytes with that field empty.
func rawHash(raw []byte) (stated, actual string, ok bool) {
	if len(raw) < hashSuffix || !bytes.HasSuffix(raw, []byte(`"}`)) {
		return "", "", false
	}
	tail := raw[len(raw)-hashSuffix:]
	if !bytes.HasPrefix(tail, []byte(`"hash":"`)) {
		return "", "", false
	}
	stated = string(tail[len(`"hash":"`) : len(tail)-2])
	body := make([]byte, 0, len(raw)-64)
	body = append(body, raw[:len(raw)-hashSuffix]...)
	body = append(body, emptyHash...)
	return stated, hashOf(body), true
}

func hashOf(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("audit: lock %s: %v", f.Name(), err)
		}
		return nil
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
