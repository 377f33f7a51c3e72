package typosquat

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/extensions/internal/exttest"
)

type recorder = exttest.Recorder

func newSquat(t *testing.T, raw string, catalogued ...string) (*Squat, *recorder) {
	t.Helper()
	e, err := New(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("New(%s): %v", raw, err)
	}
	rec := &recorder{}
	h := extension.Host{Emit: rec.Emit, Tools: func() []extension.ToolRef {
		var out []extension.ToolRef
		for _, s := range catalogued {
			out = append(out, extension.ToolRef{Server: s, Def: &mcp.Tool{Name: "t"}})
		}
		return out
	}}
	if err := exttest.Provision(e, context.Background(), h); err != nil {
		t.Fatal(err)
	}
	return e.(*Squat), rec
}

func TestSimilarity(t *testing.T) {
	tests := []struct {
		a, b string
		want float64
	}{
		{"notes-server", "notes-servar", 11.0 / 12},
		{"notes-server", "notes_server", 1},
		{"notes-server", "Notes-Server", 1},
		{"notes-server", "n0tes-server", 1},
		{"github", "gitlab", 4.0 / 6},
		{"filesystem", "memory", 1 - 9.0/10},
		{"", "", 1},
		{"a", "", 0},
		{"abc", "xyz", 0},
		{"café", "cafe", 0.75},
	}
	for _, tt := range tests {
		if got := Similarity(tt.a, tt.b); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("Similarity(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got, rev := Similarity(tt.a, tt.b), Similarity(tt.b, tt.a); got != rev {
			t.Errorf("Similarity is not symmetric for %q, %q: %v vs %v", tt.a, tt.b, got, rev)
		}
	}
}

func TestLevenshtein(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"kitten", "sitting", 3}, {"flaw", "lawn", 2}, {"abc", "", 3}, {"", "ab", 2}, {"日本語", "日本", 1},
	}
	for _, tt := range tests {
		if got := Levenshtein([]rune(tt.a), []rune(tt.b)); got != tt.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct{ raw, want string }{
		{`{"threshold": 0}`, "threshold"},
		{`{"threshold": 1.5}`, "threshold"},
		{`{"threshold": "high"}`, "threshold"},
		{`{"configured": "block"}`, "configured"},
		{`{"known": [""]}`, "known[0]"},
		{`{"allow": [" "]}`, "allow[0]"},
		{`{"treshold": 0.9}`, `unknown field "treshold"`},
	}
	for _, tt := range tests {
		_, err := New(json.RawMessage(tt.raw))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%s) = %v, want error containing %q", tt.raw, err, tt.want)
		}
	}
	for _, raw := range []string{``, `{}`, `null`, `{"threshold": 1}`, `{"threshold": 0.9, "known": ["github"], "allow": ["notes-2"], "configured": "ignore"}`} {
		if _, err := New(json.RawMessage(raw)); err != nil {
			t.Errorf("New(%s): %v", raw, err)
		}
	}
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name   string
		config string
		load   string
		rule   string // "" = allowed
		reason []string
	}{
		{"typosquat", `{}`, "notes-servar", "name_similarity", []string{`"notes-servar"`, `"notes-server"`}},
		{"separator swap", `{}`, "notes_server", "name_similarity", []string{`"notes-server"`}},
		{"case", `{}`, "Notes-Server", "name_similarity", []string{`"notes-server"`}},
		{"digit for letter", `{}`, "n0tes-server", "name_similarity", []string{`"notes-server"`}},
		{"duplicate", `{}`, "notes-server", "name_similarity.duplicate", []string{"already known"}},
		{"different name", `{}`, "weather", "", nil},
		{"below threshold", `{}`, "notes-srv", "", nil},
		{"allowed", `{"allow": ["notes-servar"]}`, "notes-servar", "", nil},
		{"lower threshold", `{"threshold": 0.6}`, "gitlab", "name_similarity", []string{`"github"`}},
		{"known name", `{"known": ["slack"]}`, "s1ack", "name_similarity", []string{`"slack"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, rec := newSquat(t, tt.config, "github")
			if _, err := s.list(context.Background(), &extension.ListRequest{ServerName: "notes-server"}, nil); err != nil {
				t.Fatal(err)
			}
			err := s.load(context.Background(), &extension.LoadRequest{ServerName: tt.load, URL: "http://x/mcp", Session: "s1"})
			if tt.rule == "" {
				if err != nil {
					t.Fatalf("load %q refused: %v", tt.load, err)
				}
				return
			}
			d, ok := extension.AsDenial(err)
			if !ok || d.Rule != tt.rule {
				t.Fatalf("load %q = %v, want denial by %s", tt.load, err, tt.rule)
			}
			for _, sub := range tt.reason {
				if !strings.Contains(d.Reason, sub) {
					t.Errorf("reason %q does not mention %s", d.Reason, sub)
				}
			}
			if tt.rule == Key {
				ev := rec.Events()
				if len(ev) != 1 || ev[0].Type != "server_name_similarity" || ev[0].Action != "block" || ev[0].Server != tt.load || ev[0].Session != "s1" {
					t.Fatalf("events = %+v", ev)
				}
				if ev[0].Fields["similar_to"] == nil || ev[0].Fields["score"] == nil {
					t.Errorf("event fields = %v", ev[0].Fields)
				}
			}
		})
	}
}

func TestConfiguredAlert(t *testing.T) {
	s, rec := newSquat(t, `{}`)
	ctx := context.Background()
	tools := []*mcp.Tool{{Name: "a"}, {Name: "b"}}
	for _, n := range []string{"notes-server", "weather", "notes-servar", "notes-servar"} {
		got, err := s.list(ctx, &extension.ListRequest{ServerName: n}, tools)
		if err != nil || len(got) != 2 {
			t.Fatalf("list %s = %v, %v; want the tools unchanged", n, got, err)
		}
	}
	ev := rec.Events()
	if len(ev) != 1 {
		t.Fatalf("events = %+v, want one alert", ev)
	}
	if e := ev[0]; e.Type != "server_name_similarity" || e.Action != "alert" || e.Server != "notes-servar" || e.Fields["similar_to"] != "notes-server" {
		t.Fatalf("event = %+v", e)
	}

	s, rec = newSquat(t, `{"configured": "ignore"}`)
	s.list(ctx, &extension.ListRequest{ServerName: "notes-server"}, nil)
	s.list(ctx, &extension.ListRequest{ServerName: "notes-servar"}, nil)
	if ev := rec.Events(); len(ev) != 0 {
		t.Fatalf("configured: ignore emitted %+v", ev)
	}
	// Once listed, a configured name is known: a run-time load of a
	// look-alike is refused.
	if err := s.load(ctx, &extension.LoadRequest{ServerName: "notes-serv3r"}); err == nil {
		t.Fatal("look-alike of a configured server loaded")
	}
}

func TestReadmeExamples(t *testing.T) { exttest.ReadmeExamples(t, Key, New) }

func TestConcurrent(t *testing.T) {
	s, _ := newSquat(t, `{}`)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				name := string(rune('a'+i)) + "-server-" + string(rune('a'+j%26))
				s.list(context.Background(), &extension.ListRequest{ServerName: name}, nil)
				s.load(context.Background(), &extension.LoadRequest{ServerName: name + "x"})
			}
		}()
	}
	wg.Wait()
}

func FuzzSimilarity(f *testing.F) {
	f.Add("notes-server", "notes-servar")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, a, b string) {
		if len(a) > 200 || len(b) > 200 {
			return
		}
		s := Similarity(a, b)
		if s < 0 || s > 1 || math.IsNaN(s) {
			t.Fatalf("Similarity(%q, %q) = %v", a, b, s)
		}
		if Normalize(a) == Normalize(b) && s != 1 {
			t.Fatalf("Similarity of names that normalise alike = %v", s)
		}
	})
}
