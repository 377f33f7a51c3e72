package gateway

import (
	"fmt"
	"strings"
	"testing"
)

// Each definition hash of a tool is recorded once: a server flipping a
// definition back and forth writes nothing after the first round, and the
// memory stays bounded however many names a server invents.
func TestRecordedHashesOncePerHash(t *testing.T) {
	var r recordedHashes
	if !r.add("s", "t", "h1", 10) || !r.add("s", "t", "h2", 10) {
		t.Fatal("new hashes not reported as new")
	}
	for range 5 {
		if r.add("s", "t", "h1", 10) || r.add("s", "t", "h2", 10) {
			t.Fatal("a definition flipped back to was recorded again")
		}
	}
	if !r.add("other", "t", "h1", 10) {
		t.Fatal("the same hash on another server is a new record")
	}
	for i := range hashMemory + 5 {
		r.add("s", "t", fmt.Sprint("x", i), 10)
	}
	if n := len(r.m["s"]["t"]); n > hashMemory {
		t.Fatalf("%d hashes remembered for one tool, want at most %d", n, hashMemory)
	}
	for i := range 1000 {
		r.add("s", fmt.Sprint("tool", i), "h", 10)
	}
	if n := len(r.m["s"]); n > 20 {
		t.Fatalf("%d tools remembered for a server with a limit of 10, want at most 20", n)
	}
	r.forget("s")
	if !r.add("s", "t", "h1", 10) {
		t.Fatal("a forgotten server's definition is not new")
	}
}

func TestLoadMessage(t *testing.T) {
	all := loadMessage("mirror", ListOutcome{Listed: 2, Usable: 0, Held: []HeldTool{
		{Tool: "read_file", Rule: "shadowing.name_collision", Reason: "its name collides"},
		{Tool: "", Rule: "catalog", Reason: "a tool without a name"},
	}})
	for _, want := range []string{`Connected "mirror": 0 of 2 tool(s) can be used.`, "2 tool(s) cannot be used:", "- read_file: its name collides (shadowing.name_collision)", "- (no name): a tool without a name (catalog)"} {
		if !strings.Contains(all, want) {
			t.Errorf("message does not say %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "search_tools") {
		t.Errorf("no usable tool, yet the message invites a search:\n%s", all)
	}
	if m := loadMessage("ok", ListOutcome{Listed: 3, Usable: 3}); m != `Connected "ok": 3 of 3 tool(s) can be used. Use search_tools to find them.` {
		t.Errorf("clean load: %q", m)
	}
	var held []HeldTool
	for i := range 50 {
		held = append(held, HeldTool{Tool: fmt.Sprint("t", i), Rule: "r", Reason: "why"})
	}
	long := loadMessage("big", ListOutcome{Listed: 60, Usable: 10, Held: held})
	if n := strings.Count(long, "\n- t"); n != 20 || !strings.Contains(long, "- and 30 more") {
		t.Errorf("50 blocked tools: %d listed in the message, want 20 and a count of the rest:\n%s", n, long)
	}
}
