package extmcp

import "testing"

// FuzzProcessorAnswers feeds arbitrary bytes to every parser of a
// processor's answers: none may panic, and an accepted tools/call mutation
// always yields arguments.
func FuzzProcessorAnswers(f *testing.F) {
	for _, s := range []string{
		`{"name":"read_file","arguments":{"path":"/a"}}`,
		`{"arguments":null}`,
		`{"content":[{"type":"text","text":"x"}],"isError":true}`,
		`{"tools":[{"name":"read_file","description":"d","inputSchema":{"type":"object"}}]}`,
		`{"tools":null}`,
		`{"code":-32001,"message":"m","data":[1]}`,
		`{"error":{"code":1}}`,
		`[]`, `null`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	rs := results("fs__read_file", "fs__write_file")
	f.Fuzz(func(t *testing.T, b []byte) {
		if args, err := decodeCallParams(b, "read_file"); err == nil && args == nil {
			t.Errorf("accepted %q with nil arguments", b)
		}
		if r, err := decodeResult(b); err == nil && r.Content == nil {
			t.Errorf("accepted %q with nil content", b)
		}
		if kept, err := applyListing(b, rs); err == nil && len(kept) > len(rs) {
			t.Errorf("listing %q kept %d of %d", b, len(kept), len(rs))
		}
		if e, err := parseRPCError(b); err == nil && e == nil {
			t.Errorf("accepted %q as no error", b)
		}
	})
}
