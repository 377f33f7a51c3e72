package upstream

import (
	"bytes"
	"testing"
)

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
