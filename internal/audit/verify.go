package audit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// BrokenError reports the first record that breaks the chain, or the
// checkpoint the log disagrees with (Line 0).
type BrokenError struct {
	File   string
	Line   int
	Seq    uint64
	Reason string
}

func (e *BrokenError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("audit chain broken: %s: %s", e.File, e.Reason)
	}
	return fmt.Sprintf("audit chain broken at %s line %d (seq %d): %s", e.File, e.Line, e.Seq, e.Reason)
}

// Report is what Verify checked.
type Report struct {
	Records     int    // records verified
	Files       int    // files read
	First, Last uint64 // seq of the first and last record
	Checkpoint  uint64 // the checkpoint's seq
	// PastCheckpoint is 1 when the last record is one past the checkpoint:
	// the process stopped between writing a record and its checkpoint (the
	// next append fixes it), or someone appended a record.
	PastCheckpoint int
}

// snapshot is the log's files, opened together with its checkpoint read
// under a shared lock, so that a concurrent append or rotation cannot make
// the two disagree. Reading happens after the lock is released: renamed or
// deleted files stay readable through their open descriptors, and the
// current file is read only up to its size at the time.
type snapshot struct {
	files []snapFile
	ck    *checkpoint
}

type snapFile struct {
	name string
	f    *os.File
	size int64
}

func (s *snapshot) close() {
	for _, f := range s.files {
		f.f.Close()
	}
}

func openSnapshot(path string) (*snapshot, error) {
	// A log never written by this version has no lock file; nothing to
	// wait for then.
	if lock, err := os.Open(lockPath(path)); err == nil {
		defer lock.Close()
		if err := flock(lock, syscall.LOCK_SH); err != nil {
			return nil, err
		}
		defer flock(lock, syscall.LOCK_UN)
	}
	names, err := Files(path)
	if err != nil {
		return nil, err
	}
	s := &snapshot{}
	for _, n := range names {
		f, err := os.Open(n)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("audit: %v", err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			s.close()
			return nil, fmt.Errorf("audit: %v", err)
		}
		s.files = append(s.files, snapFile{name: n, f: f, size: st.Size()})
	}
	if s.ck, err = readCheckpoint(path); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// each calls fn for every record of every file, in chain order.
func (s *snapshot) each(fn func(file string, line int, raw []byte) error) error {
	for _, sf := range s.files {
		if err := scan(io.LimitReader(sf.f, sf.size), func(line int, raw []byte) error { return fn(sf.name, line, raw) }); err != nil {
			return err
		}
	}
	return nil
}

// Verify checks the log at path: every record's hash against its bytes,
// every link to the record before across rotated files, the first record
// against the start of the chain, and the last against the checkpoint. It
// returns what it checked and, if the chain is broken, a *BrokenError
// naming the first bad record.
//
// What it cannot prove: the chain has no secret key, so someone able to
// rewrite the log files and the checkpoint together and recompute every
// hash is not detected. Comparing the checkpoint with a copy kept
// elsewhere (the seq and hash in /status and /metrics) closes that gap.
func Verify(path string) (Report, error) {
	var rep Report
	s, err := openSnapshot(path)
	if err != nil {
		return rep, err
	}
	defer s.close()
	if len(s.files) == 0 && s.ck == nil {
		return rep, fmt.Errorf("no audit log at %s: %w", path, fs.ErrNotExist)
	}
	rep.Files = len(s.files)
	ck := s.ck
	if ck != nil {
		rep.Checkpoint = ck.Seq
	}
	var lastHash, lastFile string
	lastLine := 0
	err = s.each(func(file string, line int, raw []byte) error {
		lastFile, lastLine = file, line
		e, perr := parseRecord(raw)
		if perr != nil {
			reason := "not a valid record: " + perr.Error()
			if errors.Is(perr, errEdited) {
				reason = "hash does not match the record's content (it was edited)"
			}
			return &BrokenError{File: file, Line: line, Reason: reason}
		}
		if e.Seq == 0 {
			return &BrokenError{File: file, Line: line, Reason: "not a valid record: seq 0"}
		}
		switch {
		case rep.Records == 0 && e.Seq == 1:
			if e.Prev != genesis {
				return &BrokenError{File: file, Line: line, Seq: e.Seq, Reason: "the first record does not start the chain"}
			}
		case rep.Records == 0:
			// Older files were rotated away: the checkpoint says how far.
			if ck == nil || e.Seq > ck.First {
				first := uint64(1)
				if ck != nil {
					first = ck.First
				}
				return &BrokenError{File: file, Line: line, Seq: e.Seq, Reason: fmt.Sprintf("the log starts at seq %d but should start at seq %d (records at its start were removed)", e.Seq, first)}
			}
		case e.Prev != lastHash:
			return &BrokenError{File: file, Line: line, Seq: e.Seq, Reason: "prev does not match the hash of the record before (a record was removed, inserted or reordered)"}
		case e.Seq != rep.Last+1:
			return &BrokenError{File: file, Line: line, Seq: e.Seq, Reason: fmt.Sprintf("seq is %d, want %d", e.Seq, rep.Last+1)}
		}
		if ck != nil {
			if e.Seq == ck.Seq && e.Hash != ck.Hash {
				return &BrokenError{File: file, Line: line, Seq: e.Seq, Reason: "the record differs from the one the checkpoint names (it was replaced)"}
			}
			if e.Seq > ck.Seq+1 {
				return &BrokenError{File: file, Line: line, Seq: e.Seq, Reason: fmt.Sprintf("the record is past the checkpoint (seq %d): records were appended by something other than toolgate", ck.Seq)}
			}
		}
		if rep.Records == 0 {
			rep.First = e.Seq
		}
		rep.Last, lastHash = e.Seq, e.Hash
		rep.Records++
		return nil
	})
	if err != nil {
		return rep, err
	}
	switch {
	case ck == nil && rep.Records > 0:
		return rep, &BrokenError{File: checkpointPath(path), Reason: "missing: the end of the log cannot be checked (a log written before checkpoints existed gets one when the gateway next opens it)"}
	case ck == nil:
	case rep.Records == 0:
		return rep, &BrokenError{File: path, Reason: fmt.Sprintf("the log is empty or missing but the checkpoint says seq %d: the log was emptied or deleted", ck.Seq)}
	case rep.Last < ck.Seq:
		return rep, &BrokenError{File: lastFile, Line: lastLine + 1, Seq: rep.Last + 1, Reason: fmt.Sprintf("the log ends at seq %d but the checkpoint says seq %d: the last %d record(s) were removed", rep.Last, ck.Seq, ck.Seq-rep.Last)}
	case rep.Last == ck.Seq+1:
		rep.PastCheckpoint = 1
	}
	return rep, nil
}

// Read calls fn for every record of the log at path, across rotated files
// in order, stopping at fn's first error. A log with no file is an error
// wrapping fs.ErrNotExist.
func Read(path string, fn func(*Event) error) error {
	s, err := openSnapshot(path)
	if err != nil {
		return err
	}
	defer s.close()
	if len(s.files) == 0 {
		return fmt.Errorf("no audit log at %s: %w", path, fs.ErrNotExist)
	}
	return s.each(func(file string, line int, raw []byte) error {
		e, err := decodeRecord(raw)
		if err != nil {
			return fmt.Errorf("audit %s line %d: %v", file, line, err)
		}
		return fn(e)
	})
}

func scan(r io.Reader, fn func(line int, raw []byte) error) error {
	br := bufio.NewReaderSize(r, 64*1024)
	line := 0
	for {
		raw, err := br.ReadBytes('\n')
		if len(raw) > 0 {
			line++ // blank lines count, so the number is the one an editor shows
		}
		if t := bytes.TrimRight(raw, "\r\n"); len(bytes.TrimSpace(t)) > 0 {
			if ferr := fn(line, t); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// ParseRecord decodes one record line (without or with its newline) and
// checks its hash against its bytes.
func ParseRecord(raw []byte) (*Event, error) {
	return parseRecord(bytes.TrimSuffix(raw, []byte("\n")))
}

// Chains checks records of several replicas' chains arriving interleaved
// (the merged view of replicas sharing state): each record's own hash,
// and that it follows the last record seen of its replica (next seq, prev
// is that record's hash). A replica's first record seen may start
// anywhere in its chain: the merged view keeps the recent part.
type Chains struct {
	last map[string]Head
}

// Add checks raw, a record of replica, and returns it decoded.
func (c *Chains) Add(replica string, raw []byte) (*Event, error) {
	e, err := ParseRecord(raw)
	if err != nil {
		return nil, err
	}
	if c.last == nil {
		c.last = map[string]Head{}
	}
	if h, ok := c.last[replica]; ok {
		if e.Seq != h.Seq+1 {
			return e, fmt.Errorf("replica %q: seq %d follows seq %d (a record is missing or reordered)", replica, e.Seq, h.Seq)
		}
		if e.Prev != h.Hash {
			return e, fmt.Errorf("replica %q: seq %d does not link to seq %d (prev hash differs)", replica, e.Seq, h.Seq)
		}
	}
	c.last[replica] = Head{Seq: e.Seq, Hash: e.Hash}
	return e, nil
}

// Heads returns the last record seen of each replica.
func (c *Chains) Heads() map[string]Head { return c.last }
