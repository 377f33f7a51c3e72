// Package flow is the cross_server extension: it classifies every tool as
// read, write, send, compute or unknown and, per session, refuses data
// flows between servers that look like exfiltration: a send on one server
// after a read from another within a window (read_then_send, critical), and
// optionally any write, send, compute or unknown call after such a read
// (cross_server_flow, high). Each decision is made under the session's lock,
// so two concurrent calls cannot both slip past.
package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/extensions/internal/strict"
)

// Key is the filters config key.
const Key = "cross_server"

func init() { extension.Register(Key, New) }

// Categories of tools.
const (
	Read    = "read"
	Write   = "write"
	Send    = "send"
	Compute = "compute"
	Unknown = "unknown"
)

// DefaultWindow is how long a read taints a session.
const DefaultWindow = 30 * time.Second

// Config is the cross_server object.
type Config struct {
	ReadThenSend    *Rule      `json:"read_then_send"`
	CrossServerFlow *Rule      `json:"cross_server_flow"`
	Classify        []Classify `json:"classify"`
}

// Rule configures one detection.
type Rule struct {
	Enabled *bool  `json:"enabled"`
	Window  string `json:"window"`
	// Action is "block" or "alert" (record and allow).
	Action string `json:"action"`

	window time.Duration
	on     bool
}

// Classify assigns a category to tools whose qualified name matches a glob.
type Classify struct {
	Tools    string `json:"tools"`
	Category string `json:"category"`
}

// Flow is the extension.
type Flow struct {
	extension.Base
	cfg  Config
	emit func(context.Context, extension.Event)
	now  func() time.Time

	mu       sync.Mutex
	sessions map[string]*session
}

type session struct {
	mu    sync.Mutex
	reads []read
}

type read struct {
	at     time.Time
	server string
	tool   string
}

// New decodes the config strictly and applies defaults: read_then_send on,
// blocking, 30 s; cross_server_flow on, alerting, 30 s.
func New(raw json.RawMessage) (extension.Extension, error) {
	var cfg Config
	if err := strict.Decode(raw, &cfg); err != nil {
		return nil, err
	}
	if cfg.ReadThenSend == nil {
		cfg.ReadThenSend = &Rule{}
	}
	if cfg.CrossServerFlow == nil {
		cfg.CrossServerFlow = &Rule{}
	}
	if err := cfg.ReadThenSend.setup("read_then_send", "block"); err != nil {
		return nil, err
	}
	if err := cfg.CrossServerFlow.setup("cross_server_flow", "alert"); err != nil {
		return nil, err
	}
	for i, c := range cfg.Classify {
		if _, err := path.Match(c.Tools, ""); err != nil || c.Tools == "" {
			return nil, fmt.Errorf("classify[%d].tools: bad glob %q", i, c.Tools)
		}
		switch c.Category {
		case Read, Write, Send, Compute, Unknown:
		default:
			return nil, fmt.Errorf("classify[%d].category %q: want read, write, send, compute or unknown", i, c.Category)
		}
	}
	return &Flow{cfg: cfg, now: time.Now, sessions: map[string]*session{}}, nil
}

func (r *Rule) setup(name, action string) error {
	r.on = r.Enabled == nil || *r.Enabled
	r.window = DefaultWindow
	if r.Window != "" {
		d, err := time.ParseDuration(r.Window)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s.window: want a positive duration such as \"30s\", got %q", name, r.Window)
		}
		r.window = d
	}
	switch r.Action {
	case "":
		r.Action = action
	case "block", "alert":
	default:
		return fmt.Errorf("%s.action %q: want \"block\" or \"alert\"", name, r.Action)
	}
	return nil
}

func (*Flow) ID() string             { return "dev.toolgate/cross_server" }
func (*Flow) Phase() extension.Phase { return extension.PhaseAdmit }

func (f *Flow) Provision(_ context.Context, h extension.Host) error {
	f.emit = h.Emit
	return nil
}

func (f *Flow) CallFilter() extension.CallFilter { return f.check }

func (f *Flow) session(key string) *session {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sessions[key]
	if s == nil {
		s = &session{}
		f.sessions[key] = s
	}
	return s
}

func (f *Flow) check(ctx context.Context, c *extension.CallRequest) error {
	cat := f.Category(c.ToolName, c.Tool, c.Def)
	s := f.session(c.Session + "\x00" + c.Principal)
	now := f.now()

	s.mu.Lock()
	defer s.mu.Unlock()
	keep := max(f.cfg.ReadThenSend.window, f.cfg.CrossServerFlow.window)
	i := 0
	for i < len(s.reads) && now.Sub(s.reads[i].at) >= keep {
		i++
	}
	s.reads = s.reads[i:]

	if cat == Send && f.cfg.ReadThenSend.on {
		if r, ok := f.crossRead(s, c.ServerName, now, f.cfg.ReadThenSend.window); ok {
			if err := f.fire(ctx, c, "read_then_send", "critical", f.cfg.ReadThenSend.Action, cat, r); err != nil {
				return err
			}
		}
	}
	if cat != Read && f.cfg.CrossServerFlow.on {
		if r, ok := f.crossRead(s, c.ServerName, now, f.cfg.CrossServerFlow.window); ok {
			if err := f.fire(ctx, c, "cross_server_flow", "high", f.cfg.CrossServerFlow.Action, cat, r); err != nil {
				return err
			}
		}
	}
	if cat == Read {
		s.reads = append(s.reads, read{at: now, server: c.ServerName, tool: c.ToolName})
	}
	return nil
}

// crossRead finds the latest read from another server within window.
func (f *Flow) crossRead(s *session, server string, now time.Time, window time.Duration) (read, bool) {
	for i := len(s.reads) - 1; i >= 0; i-- {
		r := s.reads[i]
		if now.Sub(r.at) >= window {
			break
		}
		if r.server != server {
			return r, true
		}
	}
	return read{}, false
}

func (f *Flow) fire(ctx context.Context, c *extension.CallRequest, rule, severity, action, cat string, r read) error {
	age := f.now().Sub(r.at).Round(time.Second)
	f.emit(ctx, extension.Event{
		Type: "cross_server_blocked", Session: c.Session, Server: c.ServerName, Tool: c.Tool, Action: action, Reason: rule,
		Fields: map[string]any{"rule": rule, "severity": severity, "category": cat, "related_calls": []string{r.tool}, "related_server": r.server},
	})
	if action != "block" {
		return nil
	}
	return extension.Denyf("cross_server."+rule,
		"%s (%s) is a %s on server %q %s after a read from server %q (%s); cross-server data flows like this are blocked. Wait for the window to pass or ask the user to confirm outside the conversation.",
		c.ToolName, severity, cat, c.ServerName, age, r.server, r.tool)
}

// prefixes map the first word of a tool name to a category.
var prefixes = map[string]string{}

func init() {
	for cat, words := range map[string]string{
		Read:    "read get fetch list search query find view describe show lookup load download open inspect retrieve browse check count",
		Send:    "send post email mail publish notify share tweet message sms upload submit push reply forward webhook",
		Write:   "write create update delete remove edit move rename set add insert put patch save append drop replace modify",
		Compute: "compute calculate convert transform run exec execute eval evaluate generate render parse format analyze summarize translate",
	} {
		for _, w := range strings.Fields(words) {
			prefixes[w] = cat
		}
	}
}

// Category classifies a tool: configuration first, then the definition's
// annotations, then the first word of its name.
func (f *Flow) Category(qualified, tool string, def *mcp.Tool) string {
	for _, c := range f.cfg.Classify {
		if ok, _ := path.Match(c.Tools, qualified); ok {
			return c.Category
		}
	}
	if def != nil && def.Annotations != nil {
		a := def.Annotations
		switch {
		case a.ReadOnlyHint:
			return Read
		case a.OpenWorldHint != nil && *a.OpenWorldHint:
			return Send
		case a.DestructiveHint != nil && *a.DestructiveHint:
			return Write
		}
	}
	return byName(tool)
}

func byName(tool string) string {
	first := strings.FieldsFunc(tool, func(r rune) bool { return r == '_' || r == '-' || r == '.' || r == ' ' })
	if len(first) == 0 {
		return Unknown
	}
	w := first[0]
	// camelCase: "sendEmail" → "send".
	for i, r := range w {
		if i > 0 && unicode.IsUpper(r) {
			w = w[:i]
			break
		}
	}
	if cat, ok := prefixes[strings.ToLower(w)]; ok {
		return cat
	}
	return Unknown
}
