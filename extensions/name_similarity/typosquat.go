// Package typosquat is the name_similarity extension: it compares the name
// of every server the gateway meets (configured or loaded with
// load_mcp_server) with the servers it already knows, by normalised
// Levenshtein similarity, and treats a name above the threshold as an
// impersonation attempt ("notes-servar" next to "notes-server"). A run-time
// load is refused before any connection is made; a configured server is
// reported (a server_name_similarity event and a warning) but kept, since
// the operator wrote it down. A name identical to a known one is a
// duplicate, refused with its own message.
package typosquat

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/audit"
)

// Key is the filters config key.
const Key = "name_similarity"

func init() { extension.Register(Key, FromConfig) }

// New builds the extension from its raw config, decoded strictly.
var New = extension.ConfigFactory(FromConfig)

// DefaultThreshold is the similarity at and above which two different names
// are considered confusable.
const DefaultThreshold = 0.85

// Config is the name_similarity object.
type Config struct {
	// Threshold in (0, 1]; default 0.85.
	Threshold *float64 `json:"threshold"`
	// Known are names to protect besides the servers the gateway has seen
	// (e.g. servers you use elsewhere, or popular ones).
	Known []string `json:"known"`
	// Allow are server names that may be loaded even though they resemble
	// a known one (e.g. "mcp-server-b" beside "mcp-server-a").
	Allow []string `json:"allow"`
	// Configured is the action for configured servers: "alert" (default)
	// or "ignore".
	Configured string `json:"configured"`
}

// Squat is the extension.
type Squat struct {
	threshold  float64
	known      []string
	allow      map[string]bool
	configured string

	emit  func(context.Context, extension.Event)
	tools func() []extension.ToolRef
	log   *slog.Logger

	mu       sync.Mutex
	seen     map[string]bool // servers listed so far
	reported map[[2]string]bool
}

// New decodes the config strictly. Construction has no side effects.
func FromConfig(cfg Config) (extension.Extension, error) {
	s := &Squat{threshold: DefaultThreshold, allow: map[string]bool{}, configured: "alert", seen: map[string]bool{}, reported: map[[2]string]bool{}}
	if cfg.Threshold != nil {
		if *cfg.Threshold <= 0 || *cfg.Threshold > 1 {
			return nil, fmt.Errorf("threshold: want a number in (0, 1], got %v", *cfg.Threshold)
		}
		s.threshold = *cfg.Threshold
	}
	for i, n := range cfg.Known {
		if strings.TrimSpace(n) == "" {
			return nil, fmt.Errorf("known[%d]: empty name", i)
		}
		s.known = append(s.known, n)
	}
	for i, n := range cfg.Allow {
		if strings.TrimSpace(n) == "" {
			return nil, fmt.Errorf("allow[%d]: empty name", i)
		}
		s.allow[n] = true
	}
	switch cfg.Configured {
	case "":
	case "alert", "ignore":
		s.configured = cfg.Configured
	default:
		return nil, fmt.Errorf("configured %q: want \"alert\" or \"ignore\"", cfg.Configured)
	}
	return s, nil
}

func (*Squat) ID() string             { return "dev.toolgate/name_similarity" }
func (*Squat) Phase() extension.Phase { return extension.PhaseAdmit }

func (s *Squat) Provision(_ context.Context, h extension.Host) error {
	s.emit, s.tools, s.log = h.Emit, h.Tools, h.Logger
	return nil
}

func (s *Squat) FilterLoad(ctx context.Context, req *extension.LoadRequest) error {
	return s.load(ctx, req)
}
func (s *Squat) FilterList(ctx context.Context, req *extension.ListRequest, tools []*mcp.Tool) ([]*mcp.Tool, error) {
	return s.list(ctx, req, tools)
}

// Match is a known name that a candidate resembles.
type Match struct {
	Name  string
	Score float64
}

// knownNames is every name the candidate is compared with: servers already
// listed, servers in the catalogue and the configured known names.
func (s *Squat) knownNames() []string {
	set := map[string]bool{}
	for _, n := range s.known {
		set[n] = true
	}
	s.mu.Lock()
	for n := range s.seen {
		set[n] = true
	}
	s.mu.Unlock()
	if s.tools != nil {
		for _, t := range s.tools() {
			set[t.Server] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Closest returns the known name most similar to name (excluding name
// itself), and whether it reaches the threshold.
func (s *Squat) Closest(name string, known []string) (Match, bool) {
	best := Match{}
	for _, k := range known {
		if k == name {
			continue
		}
		if sc := Similarity(name, k); sc > best.Score || (sc == best.Score && best.Name == "") {
			best = Match{Name: k, Score: sc}
		}
	}
	return best, best.Name != "" && best.Score >= s.threshold
}

// load refuses a run-time load whose name duplicates or resembles a known
// server's, before any connection is made.
func (s *Squat) load(ctx context.Context, req *extension.LoadRequest) error {
	known := s.knownNames()
	if slices.Contains(known, req.ServerName) {
		return &extension.Denial{
			Rule:   Key + ".duplicate",
			Reason: fmt.Sprintf("a server named %q is already known to this gateway; choose another name", req.ServerName),
			Code:   extension.CodeInvalid,
		}
	}
	if s.allow[req.ServerName] {
		return nil
	}
	m, hit := s.Closest(req.ServerName, known)
	if !hit {
		return nil
	}
	s.emit(ctx, extension.Event{
		Type: audit.ServerNameSimilar, Session: req.Session, Server: req.ServerName, Action: "block", Reason: Key,
		Fields: map[string]any{"similar_to": m.Name, "score": round3(m.Score), "threshold": s.threshold, "run_time": true, "url": req.URL},
	})
	return &extension.Denial{
		Rule: Key,
		Reason: fmt.Sprintf("the server name %q is confusingly similar to the existing server %q, so it could be impersonating it; load it under a clearly different name if the user really wants it",
			req.ServerName, m.Name),
		Detail: fmt.Sprintf("similarity %.3f >= threshold %.3f", m.Score, s.threshold),
		Code:   extension.CodePermissionDenied,
	}
}

// list records every listed server as known, and reports a configured
// server whose name resembles one seen before it. It never drops tools.
func (s *Squat) list(ctx context.Context, req *extension.ListRequest, tools []*mcp.Tool) ([]*mcp.Tool, error) {
	known := s.knownNames()
	s.mu.Lock()
	s.seen[req.ServerName] = true
	s.mu.Unlock()
	if req.RunTime || s.configured == "ignore" || s.allow[req.ServerName] {
		// A run-time server was checked by the load filter already.
		return tools, nil
	}
	m, hit := s.Closest(req.ServerName, known)
	if !hit {
		return tools, nil
	}
	pair := [2]string{min(req.ServerName, m.Name), max(req.ServerName, m.Name)}
	s.mu.Lock()
	dup := s.reported[pair]
	s.reported[pair] = true
	s.mu.Unlock()
	if dup {
		return tools, nil
	}
	if s.log != nil {
		s.log.Warn("configured server name resembles another server's; check it is the server you meant", "server", req.ServerName, "similar_to", m.Name, "score", round3(m.Score))
	}
	s.emit(ctx, extension.Event{
		Type: audit.ServerNameSimilar, Server: req.ServerName, Action: "alert", Reason: Key,
		Fields: map[string]any{"similar_to": m.Name, "score": round3(m.Score), "threshold": s.threshold, "run_time": false},
	})
	return tools, nil
}

// Normalize folds what a reader does not tell apart: case, '_' and '.'
// written for '-', and the digits 0 and 1 written for the letters o and l.
func Normalize(name string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '_', '.', ' ':
			return '-'
		case '0':
			return 'o'
		case '1':
			return 'l'
		}
		return r
	}, strings.ToLower(name))
}

// Similarity is 1 - d/max(len(a), len(b)) over the normalised names, where
// d is the Levenshtein distance in runes: 1 for names that normalise alike,
// 0 for names with nothing in common.
func Similarity(a, b string) float64 {
	ra, rb := []rune(Normalize(a)), []rune(Normalize(b))
	n := max(len(ra), len(rb))
	if n == 0 {
		return 1
	}
	return 1 - float64(Levenshtein(ra, rb))/float64(n)
}

// Levenshtein is the edit distance (insertions, deletions, substitutions)
// between a and b, in O(len(a)·len(b)) time and O(len(b)) space.
func Levenshtein(a, b []rune) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func round3(f float64) float64 { return float64(int(f*1000+0.5)) / 1000 }
