package upstream

import (
	"bytes"
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
			tap := &lineTap{r: &chunked{r: strings.NewReader(in), n: chunk}, max: 64, onMessage: func(b []byte) { got = append(got, string(b)) }}
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

func TestSSEData(t *testing.T) {
	for ev, want := range map[string]string{
		"event: message\ndata: {\"a\":1}\n\n": `{"a":1}`,
		"id: 4\r\ndata:{\"a\":1}\r\n\r\n":     `{"a":1}`,
		"data: {\"a\":\ndata: 1}\n\n":         "{\"a\":\n1}",
		": keep-alive\n\n":                    "",
		"event: message\ndata: x\nid: 9\n\n":  "x",
	} {
		if got := sseData([]byte(ev)); !bytes.Equal(got, []byte(want)) && !(len(got) == 0 && want == "") {
			t.Errorf("sseData(%q) = %q, want %q", ev, got, want)
		}
	}
}
