package audit

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// encodeNew is Append's encoding of e at seq after prev.
func encodeNew(l *Log, e Event, seq uint64, prev string) ([]byte, string, error) {
	body, err := l.encodeBody(nil, &e)
	if err != nil {
		return nil, "", err
	}
	line, hash := appendLine(nil, seq, body, prev)
	return line, hash, nil
}

func testRedact(s string) string { return strings.ReplaceAll(s, "sekrit", "[REDACTED]") }

type finding struct {
	Rule     string            `json:"rule"`
	Severity string            `json:"severity,omitempty"`
	Score    float64           `json:"score"`
	Tags     []string          `json:"tags"`
	Extra    map[string]string `json:"extra,omitempty"`
	When     time.Time         `json:"when"`
}

type level string

var tricky = []string{
	"", "plain", "sekrit", "a sekrit here", "quote\" back\\slash", "<script>&amp;</script>",
	"nl\nret\rtab\tbs\bff\f", "\x00\x01\x1f\x7f", "héllo wörld", "日本語", "emoji 🚀",
	"\u2028line\u2029para", "bad \xff utf8 \xc3", "\xed\xa0\x80 surrogate", "\xff", "\xfe",
	"\ufffd", "sek\xffrit", "key with spaces", "ü" + "sekrit",
}

var floats = []float64{0, math.Copysign(0, -1), 1, -1, 1.5, 0.1, 1e-6, 1e-7, 9.99e-7, 1e20, 1e21, 1.5e300,
	-2.5e-10, 123456789.125, math.MaxFloat64, math.SmallestNonzeroFloat64, 1 << 53, 3.0000000000000004}

func randValue(r *rand.Rand, depth int) any {
	n := 16
	if depth > 3 {
		n = 11 // scalars only
	}
	switch r.IntN(n) {
	case 0:
		return nil
	case 1, 2:
		return tricky[r.IntN(len(tricky))]
	case 3:
		return r.IntN(2) == 0
	case 4:
		return floats[r.IntN(len(floats))]
	case 5:
		return float32(floats[r.IntN(len(floats))])
	case 6:
		return r.IntN(1<<40) - 1<<39
	case 7:
		return uint64(r.Uint64())
	case 8:
		return json.Number([]string{"0", "-1", "1.50", "1e3", "2E-7", ""}[r.IntN(6)])
	case 9:
		return level(tricky[r.IntN(len(tricky))])
	case 10:
		return []byte(tricky[r.IntN(len(tricky))])
	case 11:
		return randMap(r, depth+1)
	case 12:
		s := make([]any, r.IntN(4))
		for i := range s {
			s[i] = randValue(r, depth+1)
		}
		return s
	case 13:
		s := make([]string, r.IntN(4))
		for i := range s {
			s[i] = tricky[r.IntN(len(tricky))]
		}
		return s
	case 14:
		return finding{Rule: tricky[r.IntN(len(tricky))], Score: floats[r.IntN(len(floats))], Tags: []string{tricky[r.IntN(len(tricky))]},
			Extra: map[string]string{tricky[r.IntN(len(tricky))]: tricky[r.IntN(len(tricky))]}, When: time.Unix(r.Int64N(1<<33), r.Int64N(1e9)).UTC()}
	default:
		return []finding{{Rule: "r1", Severity: "high"}, {Rule: "sekrit", Tags: nil}}
	}
}

func randMap(r *rand.Rand, depth int) map[string]any {
	switch r.IntN(8) {
	case 0:
		return nil
	case 1:
		return map[string]any{}
	}
	m := map[string]any{}
	for range r.IntN(8) {
		m[tricky[r.IntN(len(tricky))]+[]string{"", "k", "duration_ms"}[r.IntN(3)]] = randValue(r, depth)
	}
	return m
}

// TestEncoderMatchesReflection: the hand-written encoder writes the bytes,
// and so the hash, the reflection-based one wrote, over many records with
// nested fields, structs, unicode, escapes, invalid UTF-8 and numbers at
// every formatting cut-off, with and without a redactor.
func TestEncoderMatchesReflection(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, redact := range []func(string) string{nil, testRedact} {
		l := &Log{redact: redact}
		for i := range 5000 {
			e := Event{
				Time:    time.Unix(r.Int64N(1<<34), r.Int64N(1e9)).In(time.FixedZone("z", (r.IntN(48)-24)*1800)),
				Type:    tricky[r.IntN(len(tricky))],
				Session: tricky[r.IntN(len(tricky))], Principal: tricky[r.IntN(len(tricky))], Replica: tricky[r.IntN(len(tricky))], Server: tricky[r.IntN(len(tricky))], Tool: tricky[r.IntN(len(tricky))],
				Action: tricky[r.IntN(len(tricky))], Reason: tricky[r.IntN(len(tricky))],
				Fields: randMap(r, 0),
			}
			if i%7 == 0 {
				e.Time = e.Time.UTC()
			}
			seq, prev := uint64(i+1), hashOf([]byte(tricky[r.IntN(len(tricky))]))
			if i == 0 {
				prev = genesis
			}
			old := e
			old.Seq, old.Prev = seq, prev
			wantLine, wantHash, wantErr := appendReflect(old, redact)
			line, hash, err := encodeNew(l, e, seq, prev)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("record %d: error %v, reflection %v", i, err, wantErr)
			}
			if !bytes.Equal(line, wantLine) || hash != wantHash {
				t.Fatalf("record %d differs:\n got %s\nwant %s", i, line, wantLine)
			}
		}
	}
}

// TestEncoderErrorsAsReflection: values encoding/json refuses are refused.
func TestEncoderErrorsAsReflection(t *testing.T) {
	l := &Log{}
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	for name, v := range map[string]any{
		"nan": math.NaN(), "inf": math.Inf(1), "nan32": float32(math.NaN()), "bad number": json.Number("1x"),
		"chan": make(chan int), "func": func() {}, "cycle": cyclic, "nested nan": []any{map[string]any{"x": math.Inf(-1)}},
	} {
		e := Event{Time: time.Now(), Type: Search, Fields: map[string]any{"v": v}}
		_, _, wantErr := appendReflect(e, nil)
		_, _, err := encodeNew(l, e, 1, genesis)
		if err == nil || wantErr == nil {
			t.Errorf("%s: error %v, reflection %v: both should fail", name, err, wantErr)
		}
	}
	e := Event{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Type: Search}
	if _, _, err := encodeNew(l, e, 1, genesis); err == nil {
		t.Error("a year past 9999 was encoded")
	}
}

// FuzzEncoderMatchesReflection: any strings and numbers in any place of a
// record encode as encoding/json encoded them.
func FuzzEncoderMatchesReflection(f *testing.F) {
	for i, s := range tricky {
		f.Add(s, tricky[(i+1)%len(tricky)], floats[i%len(floats)], int64(i))
	}
	f.Fuzz(func(t *testing.T, a, b string, x float64, n int64) {
		l := &Log{redact: testRedact}
		e := Event{Time: time.Unix(n%(1<<34), 0).UTC(), Type: a, Tool: b, Reason: a + b,
			Fields: map[string]any{a: b, b: []any{a, x, n, map[string]any{b: a, a + b: x}}, "n": json.Number("3"), "s": []string{a, b}}}
		wantLine, wantHash, wantErr := appendReflect(Event{Time: e.Time, Type: a, Tool: b, Reason: a + b, Fields: e.Fields, Seq: 7, Prev: genesis}, testRedact)
		line, hash, err := encodeNew(l, e, 7, genesis)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("error %v, reflection %v", err, wantErr)
		}
		if !bytes.Equal(line, wantLine) || hash != wantHash {
			t.Fatalf("differs:\n got %s\nwant %s", line, wantLine)
		}
	})
}

// TestCheckpointEncodingUnchanged: the checkpoint is written as
// encoding/json wrote it, padded to its fixed size.
func TestCheckpointEncodingUnchanged(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.jsonl")
	l := mustOpen(t, p, Options{NoSync: true})
	defer l.Close()
	for i := range 3 {
		if err := l.Append(Event{Type: Search, Fields: map[string]any{"i": i}}); err != nil {
			t.Fatal(err)
		}
	}
	h := l.Head()
	want, _ := json.Marshal(checkpoint{Seq: h.Seq, Hash: h.Hash, First: 1})
	want = append(want, bytes.Repeat([]byte{' '}, checkpointSize-len(want)-1)...)
	want = append(want, '\n')
	got, _ := os.ReadFile(checkpointPath(p))
	if !bytes.Equal(got, want) {
		t.Fatalf("checkpoint\n got %q\nwant %q", got, want)
	}
}
