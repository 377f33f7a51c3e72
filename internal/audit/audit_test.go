package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestAppendVerifyReopen(t *testing.T) {
	p := filepath.Join(t.TempDir(), "audit", "audit.jsonl")
	l, err := Open(p, Options{Redact: func(s string) string { return strings.ReplaceAll(s, "s3cret-val", "[REDACTED]") }})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Append(Event{Type: ToolCalled, Server: "fs", Tool: "read", Fields: map[string]any{"i": i, "note": "has s3cret-val"}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	l.Close()
	l, err = Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Append(Event{Type: Search, Fields: map[string]any{"query": "q", "score": 0.1 + 0.2}})
	l.Close()
	n, err := Verify(p)
	if err != nil || n != 21 {
		t.Fatalf("Verify = %d, %v", n, err)
	}
	data, _ := os.ReadFile(p)
	if strings.Contains(string(data), "s3cret-val") {
		t.Fatal("secret written to the audit log")
	}
	var seqs []uint64
	Read(p, func(e *Event) error { seqs = append(seqs, e.Seq); return nil })
	if len(seqs) != 21 || seqs[20] != 21 {
		t.Fatalf("seqs %v", seqs)
	}
}

func TestVerifyCatchesTampering(t *testing.T) {
	write := func(t *testing.T) (string, []string) {
		p := filepath.Join(t.TempDir(), "a.jsonl")
		l, _ := Open(p, Options{NoSync: true})
		for _, tool := range []string{"a", "b", "c", "d"} {
			l.Append(Event{Type: ToolCallIntercepted, Tool: tool, Action: "allow"})
		}
		l.Close()
		data, _ := os.ReadFile(p)
		return p, strings.Split(strings.TrimSpace(string(data)), "\n")
	}
	tests := []struct {
		name   string
		edit   func([]string) []string
		line   int
		reason string
	}{
		{"edited", func(ls []string) []string { ls[1] = strings.Replace(ls[1], `"allow"`, `"block"`, 1); return ls }, 2, "edited"},
		{"removed", func(ls []string) []string { return append(ls[:1], ls[2:]...) }, 2, "removed"},
		{"reordered", func(ls []string) []string { ls[1], ls[2] = ls[2], ls[1]; return ls }, 2, "removed, inserted or reordered"},
		{"garbage", func(ls []string) []string { ls[3] = "{not json"; return ls }, 4, "not a valid record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, lines := write(t)
			os.WriteFile(p, []byte(strings.Join(tt.edit(lines), "\n")+"\n"), 0o600)
			_, err := Verify(p)
			var be *BrokenError
			if !errors.As(err, &be) || be.Line != tt.line || !strings.Contains(be.Reason, tt.reason) {
				t.Fatalf("Verify = %v, want line %d %q", err, tt.line, tt.reason)
			}
		})
	}
}

func TestOpenRefusesTornTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.jsonl")
	l, _ := Open(p, Options{})
	l.Append(Event{Type: Search})
	l.Close()
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":2,"ty`)
	f.Close()
	if _, err := Open(p, Options{}); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("Open = %v", err)
	}
}

func BenchmarkAppendSync(b *testing.B) {
	l, _ := Open(filepath.Join(b.TempDir(), "a.jsonl"), Options{})
	defer l.Close()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Append(Event{Type: ToolCalled, Server: "fs", Tool: "read_file"})
		}
	})
}
