package secrets

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkRedactorClean is the check every result pays: 20 known secrets,
// a 64 KiB text holding none of them.
func BenchmarkRedactorClean(b *testing.B) {
	var vals []string
	for i := range 20 {
		vals = append(vals, fmt.Sprintf("secret-value-%02d-abcdef", i))
	}
	r := NewRedactor(vals...)
	text := strings.Repeat("some seven serious sentences, set in sequence ", 64*1024/46)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if r.String(text) != text {
			b.Fatal("changed")
		}
	}
}
