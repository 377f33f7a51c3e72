// Package poisondef is the tool_poisoning extension: it scans every tool
// definition a server lists (the description and every string inside the
// input schema) with the poisoning detector of internal/poison, before the
// tool is catalogued. A poisoned definition (hidden instructions, credential
// theft, exfiltration, shell injection, path traversal, malicious
// capabilities, user patterns) is hidden, so it can be neither found by
// search_tools nor called (the default for high and critical), or kept and
// reported (alert). Every detection is a "detection" event carrying the
// findings' categories, severities, JSON paths and ~50 characters of
// context.
package poisondef

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/catalog"
	"github.com/toolgate/toolgate/internal/glob"
	"github.com/toolgate/toolgate/internal/poison"
)

// Key is the filters config key.
const Key = "tool_poisoning"

func init() { extension.Register(Key, FromConfig) }

// New builds the extension from its raw config, decoded strictly.
var New = extension.ConfigFactory(FromConfig)

// Actions.
const (
	Hide  = "hide"
	Alert = "alert"
)

// Config is the tool_poisoning object: what to do per severity, and the
// detector's settings.
type Config struct {
	// Actions maps a severity (low, medium, high, critical) to hide or
	// alert. Defaults: critical and high hide, medium and low alert.
	Actions map[string]string `json:"actions"`
	// Allow lists qualified-name globs (server__tool) that are not scanned.
	Allow []string `json:"allow"`
	// Detector tunes the detector: definition_threshold, patterns,
	// disable, max_text_bytes (the poison.Config object, as in
	// output_poisoning).
	Detector json.RawMessage `json:"detector"`
}

// DefaultActions is the action per severity when the config names none.
var DefaultActions = map[string]string{"critical": Hide, "high": Hide, "medium": Alert, "low": Alert}

// DetectorConfig decodes a raw tool_poisoning object strictly and returns
// its detector configuration, so that `toolgate scan` can run exactly the
// detector the gateway runs.
func DetectorConfig(raw json.RawMessage) (poison.Config, error) {
	var cfg Config
	if err := extension.DecodeConfig(raw, &cfg); err != nil {
		return poison.Config{}, err
	}
	c, err := poison.ParseConfig(cfg.Detector)
	if err != nil {
		return c, fmt.Errorf("detector: %v", err)
	}
	return c, nil
}

// Poison is the extension.
type Poison struct {
	actions map[string]string
	allow   []string
	det     *poison.Detector
	dcfg    poison.Config

	emit func(context.Context, extension.Event)
	log  *slog.Logger

	mu   sync.Mutex
	seen map[string][]scanned // server\x00tool → the last definitions scanned, oldest first
	vecs map[string][]float32 // server\x00tool → description embedding (classifier only)
}

// OverlapThreshold is the cosine similarity of description embeddings above
// which a tool that claims to be preferred is flagged as overlapping another
// server's tool (function_overlap). Set by judgement, not fitted: MiniLM
// puts paraphrases of one function above it and different functions of one
// domain mostly below.
const OverlapThreshold = 0.75

// overlap adds a function_overlap finding when t's description embeds
// within OverlapThreshold of a tool of another server and claims to be
// preferred, superior, or the replacement of deprecated tools.
func (p *Poison) overlap(server string, t *mcp.Tool, v poison.Verdict) poison.Verdict {
	vec, ok := p.det.Vector(t.Description)
	if !ok {
		return v
	}
	k := server + "\x00" + t.Name
	p.mu.Lock()
	defer p.mu.Unlock()
	p.vecs[k] = vec
	claim, ok := poison.PreferenceClaim(t.Description)
	if !ok {
		return v
	}
	best, bestCos := "", 0.0
	for other, ov := range p.vecs {
		if strings.HasPrefix(other, server+"\x00") {
			continue
		}
		if c := poison.Cosine(vec, ov); c > bestCos || c == bestCos && other < best {
			best, bestCos = other, c
		}
	}
	if bestCos < OverlapThreshold {
		return v
	}
	return p.det.AddFinding(v, poison.OverlapFinding(strings.Replace(best, "\x00", "__", 1), bestCos, claim))
}

// remembered is how many definitions per tool keep their verdict, so a
// server flipping a definition back and forth is scanned and reported once
// per definition, not once per listing.
const remembered = 8

type scanned struct {
	hash    string
	verdict poison.Verdict
}

// New decodes the config strictly and checks it, detector patterns
// included. Construction has no side effects.
func FromConfig(cfg Config) (extension.Extension, error) {
	p := &Poison{actions: map[string]string{}, seen: map[string][]scanned{}, vecs: map[string][]float32{}}
	for k, v := range DefaultActions {
		p.actions[k] = v
	}
	for sev, a := range cfg.Actions {
		s, err := poison.ParseSeverity(sev)
		if err != nil {
			return nil, fmt.Errorf("actions: %v", err)
		}
		switch a {
		case Hide, Alert:
			p.actions[s.String()] = a
		default:
			return nil, fmt.Errorf("actions.%s %q: want \"hide\" or \"alert\"", sev, a)
		}
	}
	for i, g := range cfg.Allow {
		if !strings.Contains(g, "__") {
			return nil, fmt.Errorf("allow[%d] %q: want a qualified-name glob such as \"docs__*\"", i, g)
		}
		p.allow = append(p.allow, strings.ToLower(g))
	}
	dcfg, err := poison.ParseConfig(cfg.Detector)
	if err != nil {
		return nil, fmt.Errorf("detector: %v", err)
	}
	// Validate now; the classifier's model is loaded in Provision.
	det, err := poison.NewDetector(dcfg)
	if err != nil {
		return nil, fmt.Errorf("detector: %v", err)
	}
	p.det, p.dcfg = det, dcfg
	return p, nil
}

func (*Poison) ID() string             { return "dev.toolgate/tool_poisoning" }
func (*Poison) Phase() extension.Phase { return extension.PhaseInspect }

func (p *Poison) Provision(_ context.Context, h extension.Host) error {
	p.emit, p.log = h.Emit, h.Logger
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	det, err := poison.Build(p.dcfg)
	if err != nil {
		return fmt.Errorf("detector: %v", err)
	}
	if !det.Classifier() && p.dcfg.Classifier == "auto" {
		p.log.Warn("poisoning classifier unavailable, rules only", "extension", Key, "hint", "run toolgate model install")
	}
	p.det = det
	return nil
}

func (p *Poison) FilterList(ctx context.Context, req *extension.ListRequest, tools []*mcp.Tool) ([]*mcp.Tool, error) {
	return p.list(ctx, req, tools)
}

// Scan returns the verdict on one definition and the action it calls for
// ("" when it is clean).
func (p *Poison) Scan(t *mcp.Tool) (poison.Verdict, string) {
	v := p.det.ScanDefinition(t.Name, t.Description, t.InputSchema)
	if !v.Malicious {
		return v, ""
	}
	return v, p.actions[v.Severity]
}

func (p *Poison) allowed(server, tool string) bool {
	q := strings.ToLower(server + "__" + tool)
	for _, g := range p.allow {
		if glob.Match(g, q) {
			return true
		}
	}
	return false
}

// list hides poisoned tools and reports each poisoned definition once.
func (p *Poison) list(ctx context.Context, req *extension.ListRequest, tools []*mcp.Tool) ([]*mcp.Tool, error) {
	kept := make([]*mcp.Tool, 0, len(tools))
	current := map[string]bool{}
	for _, t := range tools {
		if t == nil || p.allowed(req.ServerName, t.Name) {
			kept = append(kept, t)
			continue
		}
		k := req.ServerName + "\x00" + t.Name
		current[k] = true
		h := catalog.DefinitionHash(t)
		p.mu.Lock()
		var v poison.Verdict
		fresh := true
		for _, prev := range p.seen[k] {
			if prev.hash == h {
				v, fresh = prev.verdict, false
			}
		}
		p.mu.Unlock()
		if fresh {
			v = p.det.ScanDefinition(t.Name, t.Description, t.InputSchema)
			v = p.overlap(req.ServerName, t, v)
			p.mu.Lock()
			hs := p.seen[k]
			if len(hs) >= remembered {
				hs = hs[1:]
			}
			p.seen[k] = append(hs, scanned{hash: h, verdict: v})
			p.mu.Unlock()
		}
		action := ""
		if v.Malicious {
			action = p.actions[v.Severity]
		}
		if action != "" && fresh {
			p.report(ctx, req, t, h, v, action)
		}
		if action == Hide {
			req.Withhold(t.Name, Key, fmt.Sprintf("its definition looks poisoned (%s severity: %s), so it is hidden", v.Severity, strings.Join(dedupe(categories(v)), ", ")))
			continue
		}
		kept = append(kept, t)
	}
	// Forget tools the server no longer lists.
	p.mu.Lock()
	for k := range p.seen {
		if strings.HasPrefix(k, req.ServerName+"\x00") && !current[k] {
			delete(p.seen, k)
		}
	}
	for k := range p.vecs {
		if strings.HasPrefix(k, req.ServerName+"\x00") && !current[k] {
			delete(p.vecs, k)
		}
	}
	p.mu.Unlock()
	return kept, nil
}

func (p *Poison) report(ctx context.Context, req *extension.ListRequest, t *mcp.Tool, hash string, v poison.Verdict, action string) {
	cats := make([]string, 0, len(v.Findings))
	findings := make([]map[string]any, 0, len(v.Findings))
	for _, f := range v.Findings {
		cats = append(cats, f.Category)
		m := map[string]any{"category": f.Category, "severity": f.Severity, "path": f.Path, "context": f.Context}
		if f.Rule != "" {
			m["rule"] = f.Rule
		}
		if f.Detector != "" {
			m["detector"] = f.Detector
		}
		if f.Sentence != "" {
			m["score"], m["sentence"] = f.Score, f.Sentence
		}
		findings = append(findings, m)
	}
	p.log.Warn("poisoned tool definition", "server", req.ServerName, "tool", t.Name, "severity", v.Severity, "categories", strings.Join(dedupe(cats), ","), "action", action)
	p.emit(ctx, extension.Event{
		Type: audit.Detection, Server: req.ServerName, Tool: t.Name, Action: action, Reason: Key,
		Fields: map[string]any{
			"detection_type": "tool_poisoning",
			"severity":       v.Severity,
			"findings":       findings,
			"tool_hash":      hash,
			"run_time":       req.RunTime,
			"description":    fmt.Sprintf("tool %q of server %q: %s", t.Name, req.ServerName, strings.Join(dedupe(cats), ", ")),
		},
	})
}

func categories(v poison.Verdict) []string {
	out := make([]string, 0, len(v.Findings))
	for _, f := range v.Findings {
		out = append(out, f.Category)
	}
	return out
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	out := s[:0:0]
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
