package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The files beside a log at PATH: PATH.lock (flocked around appends),
// PATH.checkpoint (the chain's last seq and hash) and the rotated files
// PATH.<seq of their first record>.

func lockPath(path string) string       { return path + ".lock" }
func checkpointPath(path string) string { return path + ".checkpoint" }

func rotatedName(path string, first uint64) string {
	return fmt.Sprintf("%s.%012d", path, first)
}

type rotatedFile struct {
	path  string
	first uint64
}

// rotatedFiles lists PATH.<digits>, oldest first.
func rotatedFiles(path string) ([]rotatedFile, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("audit: %v", err)
	}
	var out []rotatedFile
	for _, e := range entries {
		suffix, ok := strings.CutPrefix(e.Name(), base+".")
		if !ok || suffix == "" || strings.Trim(suffix, "0123456789") != "" {
			continue
		}
		n, err := strconv.ParseUint(suffix, 10, 64)
		if err != nil {
			continue
		}
		out = append(out, rotatedFile{path: filepath.Join(dir, e.Name()), first: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].first < out[j].first })
	return out, nil
}

// Files lists the files of the log at path in chain order: the rotated
// ones, oldest first, then path itself if it exists.
func Files(path string) ([]string, error) {
	rotated, err := rotatedFiles(path)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(rotated)+1)
	for _, r := range rotated {
		out = append(out, r.path)
	}
	if _, err := os.Stat(path); err == nil {
		out = append(out, path)
	}
	return out, nil
}

// checkpoint anchors the chain: the last record's seq and hash, and the
// seq of the oldest record kept (rotation deletes older files).
type checkpoint struct {
	Seq   uint64 `json:"seq"`
	Hash  string `json:"hash"`
	First uint64 `json:"first"`
}

// readCheckpoint returns nil when there is no checkpoint (or an empty one).
func readCheckpoint(path string) (*checkpoint, error) {
	b, err := os.ReadFile(checkpointPath(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: %v", err)
	}
	return parseCheckpoint(path, b)
}

// parseCheckpoint decodes the checkpoint of the log at path from its bytes.
func parseCheckpoint(path string, b []byte) (*checkpoint, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	var c checkpoint
	if err := json.Unmarshal(b, &c); err != nil || len(c.Hash) != 64 || c.First == 0 {
		return nil, fmt.Errorf("audit: %s is damaged (%q)", checkpointPath(path), truncate(string(b), 80))
	}
	return &c, nil
}

// checkpointSize is the checkpoint's fixed length: the record padded with
// spaces. One write of it at offset 0 replaces it whole: every reader holds
// the lock, and it lies within one disk sector, the unit a disk writes
// whole. (A new file renamed over the old one costs a forced flush per
// append on ext4: 100 times slower.)
const checkpointSize = 256

// writeCheckpoint overwrites the checkpoint in place, encoded into buf
// (the bytes encoding/json wrote for it, padded).
func writeCheckpoint(f *os.File, buf *[checkpointSize]byte, c checkpoint, sync bool) error {
	b := append(buf[:0], `{"seq":`...)
	b = strconv.AppendUint(b, c.Seq, 10)
	b = append(b, `,"hash":`...)
	b = appendString(b, c.Hash)
	b = append(b, `,"first":`...)
	b = strconv.AppendUint(b, c.First, 10)
	b = append(b, '}')
	if len(b) >= checkpointSize {
		return fmt.Errorf("audit: checkpoint: record of %d bytes does not fit", len(b))
	}
	copy(buf[:], b) // no-op unless the record outgrew buf
	for i := len(b); i < checkpointSize; i++ {
		buf[i] = ' '
	}
	buf[checkpointSize-1] = '\n'
	_, err := f.WriteAt(buf[:], 0)
	if err == nil && sync {
		err = f.Sync()
	}
	if err != nil {
		return fmt.Errorf("audit: checkpoint: %v", err)
	}
	return nil
}

// lastRecord returns the chain's last record: the last line of the open
// current file or, when that is empty (just rotated), of the newest rotated
// file, whose name it returns. nil when the log is empty.
//
// size is cur's size, buf a buffer to reuse for reading it.
func lastRecord(path string, cur *os.File, size int64, buf *[]byte) (*Event, string, error) {
	raw, err := lastLineAt(cur, size, buf)
	if err != nil {
		return nil, "", fmt.Errorf("audit %s: %v", path, err)
	}
	where := path
	if raw == nil {
		rotated, err := rotatedFiles(path)
		if err != nil || len(rotated) == 0 {
			return nil, "", err
		}
		where = rotated[len(rotated)-1].path
		f, err := os.Open(where)
		if err != nil {
			return nil, "", fmt.Errorf("audit: %v", err)
		}
		defer f.Close()
		if raw, err = lastLine(f); err != nil {
			return nil, "", fmt.Errorf("audit %s: %v", where, err)
		}
		if raw == nil {
			return nil, "", nil
		}
	}
	e, ok := chainOf(raw)
	if !ok {
		e, err = parseRecord(raw)
	}
	if err != nil {
		return nil, "", fmt.Errorf("audit %s: the last record is damaged (%q...): %v; run `toolgate audit verify` and move the log files aside", where, truncate(string(raw), 40), err)
	}
	return e, where, nil
}

// chainOf reads what continuing the chain needs of a record (seq, prev
// and hash) without decoding it, when it has the layout this package
// writes: valid JSON, starting {"seq":N, with no other "seq" key, ending
// "prev":"<hex>","hash":"<hex>"} (keys a decoder takes the last of), and
// its bytes hash to its hash. Anything else: false, for parseRecord.
func chainOf(raw []byte) (*Event, bool) {
	const pre, prev, hash = `{"seq":`, `,"prev":"`, `","hash":"`
	tail := len(prev) + 64 + len(hash) + 64 + len(`"}`)
	if !bytes.HasPrefix(raw, []byte(pre)) || len(raw) < len(pre)+2+tail {
		return nil, false
	}
	var seq uint64
	i := len(pre)
	for ; i < len(raw) && raw[i] >= '0' && raw[i] <= '9'; i++ {
		if seq > (math.MaxUint64-9)/10 {
			return nil, false
		}
		seq = seq*10 + uint64(raw[i]-'0')
	}
	if i == len(pre) || i == len(raw) || raw[i] != ',' || raw[len(pre)] == '0' {
		return nil, false
	}
	t := raw[len(raw)-tail:]
	p, h := t[len(prev):len(prev)+64], t[len(prev)+64+len(hash):len(t)-2]
	if !bytes.HasPrefix(t, []byte(prev)) || !bytes.HasPrefix(t[len(prev)+64:], []byte(hash)) || !isHex(p) || !isHex(h) ||
		bytes.Count(raw, []byte(`"seq":`)) != 1 || !json.Valid(raw) {
		return nil, false
	}
	stated, actual, ok := rawHash(raw)
	if !ok || stated != actual {
		return nil, false
	}
	return &Event{Seq: seq, Prev: string(p), Hash: stated}, true
}

func isHex(b []byte) bool {
	for _, c := range b {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// errEdited is a record whose bytes do not hash to the hash it states.
var errEdited = errors.New("its hash does not match its content")

// decodeRecord decodes a record without checking it.
func decodeRecord(raw []byte) (*Event, error) {
	var e Event
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&e); err != nil {
		return nil, err
	}
	return &e, nil
}

// parseRecord decodes a record and checks its hash against its bytes.
func parseRecord(raw []byte) (*Event, error) {
	e, err := decodeRecord(raw)
	if err != nil {
		return nil, err
	}
	stated, actual, ok := rawHash(raw)
	if !ok || stated != e.Hash {
		return nil, errors.New("it does not end with its hash field")
	}
	if actual != stated {
		return nil, errEdited
	}
	return e, nil
}

// firstSeq is the seq of the oldest record kept (1 for an empty log).
func firstSeq(path string) (uint64, error) {
	files, err := Files(path)
	if err != nil {
		return 0, err
	}
	for _, p := range files {
		n, err := firstSeqOf(p)
		if err != nil {
			return 0, err
		}
		if n > 0 {
			return n, nil
		}
	}
	return 1, nil
}

// firstSeqOf reads the seq of a file's first record (0 when it is empty).
func firstSeqOf(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("audit: %v", err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	for {
		raw, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(raw)) > 0 {
			var e struct {
				Seq uint64 `json:"seq"`
			}
			if jerr := json.Unmarshal(raw, &e); jerr != nil || e.Seq == 0 {
				return 0, fmt.Errorf("audit %s: the first record is damaged (%q...)", path, truncate(string(raw), 40))
			}
			return e.Seq, nil
		}
		if err == io.EOF {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("audit %s: %v", path, err)
		}
	}
}

// lastLine returns the last non-empty line of f, reading from the end.
func lastLine(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return lastLineAt(f, st.Size(), nil)
}

// tailRead is the first read from a log's end: a record is most often
// shorter.
const tailRead = 4 << 10

// lastLineAt is lastLine for a file of size bytes. With buf, the first
// tailRead bytes are read into *buf (kept for the next call) rather than
// a new buffer, and the line returned is only valid until then.
func lastLineAt(f *os.File, size int64, buf *[]byte) ([]byte, error) {
	if size == 0 {
		return nil, nil
	}
	if buf != nil {
		n := min(size, tailRead)
		if int64(cap(*buf)) < n {
			*buf = make([]byte, tailRead)
		}
		b := (*buf)[:n]
		if _, err := f.ReadAt(b, size-n); err != nil && err != io.EOF {
			return nil, err
		}
		trimmed := bytes.TrimRight(b, "\n")
		if i := bytes.LastIndexByte(trimmed, '\n'); i >= 0 {
			return trimmed[i+1:], nil
		}
		if n == size && len(trimmed) > 0 {
			return trimmed, nil
		}
		// A longer record, or only newlines here: read as below.
	}
	const chunk = 64 * 1024
	var acc []byte
	for off := size; off > 0; {
		n := int64(chunk)
		if off < n {
			n = off
		}
		off -= n
		b := make([]byte, n)
		if _, err := f.ReadAt(b, off); err != nil && err != io.EOF {
			return nil, err
		}
		acc = append(b, acc...)
		trimmed := bytes.TrimRight(acc, "\n")
		if i := bytes.LastIndexByte(trimmed, '\n'); i >= 0 {
			return trimmed[i+1:], nil
		}
		if off == 0 && len(trimmed) > 0 {
			return trimmed, nil
		}
	}
	return nil, nil
}
