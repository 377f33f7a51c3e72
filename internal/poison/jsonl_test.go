package poison

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

// jsonLines reads a JSON Lines fixture file into values of T. A line that
// does not parse, or one longer than the scanner takes, fails the test with
// the file and line, rather than ending the read early.
func jsonLines[T any](tb testing.TB, path string) []T {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for n := 1; sc.Scan(); n++ {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			tb.Fatalf("%s:%d: %v", path, n, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return out
}
