package relay

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

// The line tap shows each complete line once, whatever the read sizes, and
// passes the bytes through unchanged.
func TestLineTapSplitsReadsIntoMessages(t *testing.T) {
	in := `{"a":1}` + "\n" + strings.Repeat("x", 40) + "\n\n" + `{"b":2}` + "\n" + `{"toolong":"` + strings.Repeat("y", 100) + `"}` + "\n" + `{"c":3}` + "\n" + `{"partial"`
	for _, chunk := range []int{1, 3, 7, 64, 1 << 20} {
		t.Run(fmt.Sprint(chunk), func(t *testing.T) {
			var got []string
			tap := &Lines{R: &chunked{r: strings.NewReader(in), n: chunk}, Max: 64, OnMessage: func(b []byte) { got = append(got, string(b)) }}
			out, err := io.ReadAll(tap)
			if err != nil || string(out) != in {
				t.Fatalf("passed through %q, %v", out, err)
			}
			want := []string{`{"a":1}`, strings.Repeat("x", 40), `{"b":2}`, `{"c":3}`}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("shown %q, want %q", got, want)
			}
		})
	}
}

type chunked struct {
	r io.Reader
	n int
}

func (c *chunked) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// A claimed line never reaches the reader; the others arrive whole and in
// order, whatever the read sizes.
func TestLinesClaim(t *testing.T) {
	in := "keep 1\nclaim a\nkeep 2\n" + strings.Repeat("k", 50) + "\nclaim " + strings.Repeat("b", 50) + "\nkeep 3\n"
	for _, chunk := range []int{1, 5, 17, 1 << 20} {
		var claimed []string
		l := &Lines{R: &chunked{r: strings.NewReader(in), n: chunk}, Claim: func(b []byte) bool {
			if strings.HasPrefix(string(b), "claim") {
				claimed = append(claimed, string(b))
				return true
			}
			return false
		}}
		out, err := io.ReadAll(l)
		want := "keep 1\nkeep 2\n" + strings.Repeat("k", 50) + "\nkeep 3\n"
		if err != nil || string(out) != want || len(claimed) != 2 {
			t.Fatalf("chunk %d: read %q (%v), claimed %q", chunk, out, err, claimed)
		}
	}
}
