package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// searchSettled runs search_tools until its result no longer carries the
// "indexing in progress" note, then returns the tool names. The gateway
// answers from keywords while the semantic index is being built (a
// deliberate choice: serving never waits for the model), so a test about
// semantic ranking waits for the first embedding pass, the way a patient
// client would.
func searchSettled(t *testing.T, cs *mcp.ClientSession, query string, topK int) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		res := call(t, cs, "search_tools", map[string]any{"query": query, "top_k": topK})
		names := found(t, res)
		b, _ := json.Marshal(res.StructuredContent)
		var out struct {
			Note string `json:"note"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("structuredContent %s: %v", b, err)
		}
		note := out.Note
		if note == "" {
			return names
		}
		if time.Now().After(deadline) {
			t.Fatalf("search %q still says %q after 60 s", query, note)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestSemanticSearchFindsParaphrases searches the real npm servers with
// requests that share few or no words with the tool they need.
func TestSemanticSearchFindsParaphrases(t *testing.T) {
	t.Parallel()
	requireModel(t)
	cs, logs := startStdio(t, writeConfig(t, defaultServers(t), nil))
	tests := []struct {
		query string
		want  []string // any of these in the top 5
	}{
		{"store a fact about a person in the knowledge graph", []string{"memory__create_entities", "memory__add_observations"}},
		{"add two numbers", []string{"everything__get-sum"}},
	}
	for _, tt := range tests {
		got := searchSettled(t, cs, tt.query, 5)
		if !slices.ContainsFunc(got, func(n string) bool { return slices.Contains(tt.want, n) }) {
			t.Errorf("search %q = %v, want one of %v in the top 5\nlogs:\n%s", tt.query, got, tt.want, logs)
		}
	}
}

// TestIndexCommandWarmsCache runs `toolgate index`, then checks that a
// gateway on the same state directory needs to embed nothing.
func TestIndexCommandWarmsCache(t *testing.T) {
	t.Parallel()
	requireModel(t)
	cfg := writeConfig(t, defaultServers(t), nil)
	state := t.TempDir()
	out, err := exec.Command(binPath, "index", "--config", cfg, "--state-dir", state).CombinedOutput()
	if err != nil {
		t.Fatalf("toolgate index: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "indexed ") {
		t.Fatalf("toolgate index printed no summary:\n%s", out)
	}
	vecs, _ := filepath.Glob(filepath.Join(state, "embeddings", "*.vec"))
	if len(vecs) != 1 {
		t.Fatalf("no embedding cache in %s: %v", state, vecs)
	}
	st, err := os.Stat(vecs[0])
	if err != nil || st.Size() < 12+30*(32+4*384) {
		t.Fatalf("embedding cache too small: %v %v", st, err)
	}
	// A second run finds every vector cached.
	out, err = exec.Command(binPath, "index", "--config", cfg, "--state-dir", state).CombinedOutput()
	if err != nil {
		t.Fatalf("second toolgate index: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "embedding tools not in the cache") {
		t.Fatalf("second run re-embedded tools:\n%s", out)
	}
	if st2, _ := os.Stat(vecs[0]); st2.Size() != st.Size() {
		t.Fatalf("cache grew from %d to %d bytes on a warm run", st.Size(), st2.Size())
	}
}
