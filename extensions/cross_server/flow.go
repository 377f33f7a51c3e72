// Package flow is the cross_server extension: it classifies every call as
// read, write, send, compute or unknown (by the operator's globs, else by
// name raised by what its arguments can carry; an upstream's annotations
// only ever make it stricter) and, per session, refuses data flows between
// servers that look like exfiltration: a send on one server after a read
// from another within a window (read_then_send, critical), and optionally
// any write, send, compute or unknown call after such a read
// (cross_server_flow, high). Every call that follows another server's read
// is recorded, allowed or not. Each decision is made under the session's
// lock, so two concurrent calls cannot both slip past.
package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/glob"
	"github.com/toolgate/toolgate/internal/state"
)

// Key is the filters config key.
const Key = "cross_server"

func init() { extension.Register(Key, FromConfig) }

// New builds the extension from its raw config, decoded strictly.
var New = extension.ConfigFactory(FromConfig)

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
	cfg   Config
	emit  func(context.Context, extension.Event)
	log   *slog.Logger
	now   func() time.Time
	store Store
}

// New decodes the config strictly and applies defaults: read_then_send on,
// blocking, 30 s; cross_server_flow on, alerting, 30 s.
func FromConfig(cfg Config) (extension.Extension, error) {
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
		if glob.Validate(c.Tools) != nil {
			return nil, fmt.Errorf("classify[%d].tools: bad glob %q", i, c.Tools)
		}
		switch c.Category {
		case Read, Write, Send, Compute, Unknown:
		default:
			return nil, fmt.Errorf("classify[%d].category %q: want read, write, send, compute or unknown", i, c.Category)
		}
	}
	return &Flow{cfg: cfg, now: time.Now, store: NewMemoryStore(), log: slog.New(slog.DiscardHandler)}, nil
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

// Provision takes the shared store when the gateway has one (state
// backend "redis"), so a read on one replica taints the session on all.
func (f *Flow) Provision(ctx context.Context, h extension.Host) error {
	f.emit = h.Emit
	if h.Logger != nil {
		f.log = h.Logger
	}
	if b := state.From(ctx); b != nil {
		f.store = NewRedisStore(b)
	}
	return nil
}

func (f *Flow) WrapCall(next extension.CallHandler) extension.CallHandler {
	return extension.Before(f.check)(next)
}

// check decides one call. The session's reads are read and, for a source
// that is not refused, updated in one atomic step of the store; which rule
// fires is then worked out from the read the store found. A store that
// cannot answer (shared state unreachable) refuses the call: a flow that
// cannot be checked is not waved through.
func (f *Flow) check(ctx context.Context, c *extension.CallRequest) error {
	var r ReadRecord
	var ok bool
	var err error
	var cl classification
	var st Step
	if cmd, note, pre := state.Prefetched(ctx, f); pre {
		// Decided on what the script was run with.
		p := note.(prefetched)
		cl, st = p.cl, p.st
		r, ok, err = f.store.(*redisStore).result(cmd)
	} else {
		cl, st = f.step(c)
		r, ok, err = f.store.Step(ctx, sessionKey(c), st)
	}
	cat, now := cl.category, st.At
	rts, csf := f.cfg.ReadThenSend, f.cfg.CrossServerFlow
	if err != nil {
		f.log.Error("cross-server flow could not be decided; refusing the call", "server", c.ServerName, "error", err)
		return &extension.Denial{
			Rule:   "cross_server.state_unavailable",
			Reason: fmt.Sprintf("%s was not called: its cross-server data flow could not be checked because the shared state store (Redis) is unreachable; retry shortly", c.ToolName),
			Detail: err.Error(),
			Code:   extension.CodePermissionDenied,
		}
	}
	if !ok {
		return nil
	}
	age := now.Sub(r.At)
	fired := false
	if cat == Send && rts.on && age < rts.window {
		fired = true
		if err := f.fire(ctx, c, "read_then_send", "critical", rts.Action, cl, r); err != nil {
			return err
		}
	}
	if cat != Read && csf.on && age < csf.window {
		fired = true
		if err := f.fire(ctx, c, "cross_server_flow", "high", csf.Action, cl, r); err != nil {
			return err
		}
	}
	// A call that follows another server's read is a flow decision even
	// when no rule fires: it is recorded, so an audit can tell a flow that
	// was judged harmless from one that was never seen.
	if !fired {
		f.emit(ctx, extension.Event{
			Type: "cross_server", Session: c.Session, Server: c.ServerName, Tool: c.Tool, Action: "allow", Reason: "no_rule",
			Fields: cl.fields(map[string]any{"related_calls": []string{r.Tool}, "related_server": r.Server}),
		})
	}
	return nil
}

// step classifies a call and says what the store is to do with it.
func (f *Flow) step(c *extension.CallRequest) (classification, Step) {
	cl := f.classify(c.ToolName, c.Tool, c.Def, c.Args())
	cat := cl.category
	rts, csf := f.cfg.ReadThenSend, f.cfg.CrossServerFlow
	var block time.Duration
	if cat == Send && rts.on && rts.Action == "block" {
		block = max(block, rts.window)
	}
	if cat != Read && csf.on && csf.Action == "block" {
		block = max(block, csf.window)
	}
	return cl, Step{Server: c.ServerName, Tool: c.ToolName, At: f.now(), Source: cl.source, BlockWithin: block, Keep: max(rts.window, csf.window)}
}

func sessionKey(c *extension.CallRequest) string { return c.Session + "\x00" + c.Principal }

// PrefetchCall queues the call's flow script with the other filters'
// (state.CallBatch): one Redis round trip for all of them.
func (f *Flow) PrefetchCall(_ context.Context, c *extension.CallRequest, batch *state.CallBatch) {
	r, ok := f.store.(*redisStore)
	if !ok {
		return
	}
	cl, st := f.step(c)
	keys, args := r.script(sessionKey(c), st)
	batch.Queue(f, prefetched{cl, st}, r.b, stepScript, keys, args...)
}

// prefetched is what a prefetched script was run with.
type prefetched struct {
	cl classification
	st Step
}

func (f *Flow) fire(ctx context.Context, c *extension.CallRequest, rule, severity, action string, cl classification, r ReadRecord) error {
	age := f.now().Sub(r.At).Round(time.Second)
	cat := cl.category
	f.emit(ctx, extension.Event{
		Type: "cross_server_blocked", Session: c.Session, Server: c.ServerName, Tool: c.Tool, Action: action, Reason: rule,
		Fields: cl.fields(map[string]any{"rule": rule, "severity": severity, "related_calls": []string{r.Tool}, "related_server": r.Server}),
	})
	if action != "block" {
		return nil
	}
	return extension.Denyf("cross_server."+rule,
		"%s (%s) is a %s on server %q %s after a read from server %q (%s); cross-server data flows like this are blocked. Wait for the window to pass or ask the user to confirm outside the conversation.",
		c.ToolName, severity, cat, c.ServerName, age, r.Server, r.Tool)
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

// Category classifies a tool from its definition alone (no arguments):
// see classify.
func (f *Flow) Category(qualified, tool string, def *mcp.Tool) string {
	return f.classify(qualified, tool, def, nil).category
}

// classification is what a call is, and why.
type classification struct {
	category string
	// source: the call reads data (it taints the session for other
	// servers' sinks).
	source bool
	// evidence says what made the call a sink, for the event.
	evidence []string
}

func (cl classification) fields(m map[string]any) map[string]any {
	m["category"] = cl.category
	if len(cl.evidence) > 0 {
		m["sink_evidence"] = cl.evidence
	}
	return m
}

// classify decides what a call is. The operator's classify globs are
// trusted and win. Otherwise an upstream's own annotations are hints (the
// MCP specification says so) and a hostile server sets them freely, so
// they can only make a call stricter, never lighter: readOnlyHint marks a
// read (a source) but never clears a sink, openWorldHint makes a send,
// destructiveHint a write. What decides whether a call is a sink is what
// its arguments can carry: a destination (a URL, recipient, channel,
// host... in the input schema's property names, or a URL or e-mail address
// in the argument values) makes it a send whatever its name, so fetch(url)
// and a "read-only" post_message are sends; a body without a destination
// (content, payload...) makes a read- or unknown-named tool a write.
func (f *Flow) classify(qualified, tool string, def *mcp.Tool, args map[string]any) classification {
	for _, c := range f.cfg.Classify {
		if glob.Match(c.Tools, qualified) {
			return classification{category: c.Category, source: c.Category == Read}
		}
	}
	name := byName(tool)
	cl := classification{category: name, source: name == Read}
	rank := map[string]int{Read: 0, Unknown: 1, Compute: 1, Write: 2, Send: 3}
	raise := func(cat, why string) {
		if rank[cat] > rank[cl.category] {
			cl.category = cat
		}
		if cat == Send && why != "" {
			cl.evidence = append(cl.evidence, why)
		}
	}
	if def != nil && def.Annotations != nil {
		a := def.Annotations
		if a.ReadOnlyHint {
			cl.source = true
		}
		if a.OpenWorldHint != nil && *a.OpenWorldHint {
			raise(Send, "openWorldHint")
		}
		if a.DestructiveHint != nil && *a.DestructiveHint {
			raise(Write, "")
		}
	}
	var schema any
	if def != nil {
		schema = def.InputSchema
	}
	dest, body := schemaCarries(schema, 0)
	for _, p := range dest {
		raise(Send, fmt.Sprintf("input property %q", p))
	}
	if v := destinationValue(args, 0); v != "" {
		raise(Send, "argument "+v)
	}
	if len(body) > 0 && (cl.category == Read || cl.category == Unknown || cl.category == Compute) {
		raise(Write, "")
	}
	return cl
}

// destinationWords name an input that says where data goes; bodyWords one
// that carries data. Words are matched against the parts of a property
// name (snake_case, camelCase and kebab-case split).
var (
	destinationWords = set("url urls uri uris href link links endpoint webhook webhooks callback to recipient recipients email emails mail cc bcc channel channels phone sms host hostname domain destination dest remote")
	bodyWords        = set("body content contents payload data message messages text attachment attachments file blob")
)

func set(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// maxDepth bounds the walk of schemas and arguments (they come from
// outside).
const maxDepth = 8

// schemaCarries lists the destination and body properties of a JSON
// schema, nested objects and array items included.
func schemaCarries(schema any, depth int) (dest, body []string) {
	m := asMap(schema)
	if m == nil || depth > maxDepth {
		return nil, nil
	}
	if props := asMap(m["properties"]); props != nil {
		for name, sub := range props {
			switch propKind(name) {
			case "dest":
				if canAddress(sub) {
					dest = append(dest, name)
				}
			case "body":
				body = append(body, name)
			}
			d, b := schemaCarries(sub, depth+1)
			dest, body = append(dest, d...), append(body, b...)
		}
	}
	for _, k := range []string{"items", "additionalProperties"} {
		d, b := schemaCarries(m[k], depth+1)
		dest, body = append(dest, d...), append(body, b...)
	}
	return dest, body
}

// propKind is "dest" for a property naming a destination, "body" for one
// carrying data, else "".
func propKind(name string) string {
	kind := ""
	for _, part := range nameParts(name) {
		if destinationWords[part] {
			return "dest"
		}
		if bodyWords[part] {
			kind = "body"
		}
	}
	return kind
}

// canAddress reports whether a property's schema can hold an address: not
// a number, boolean or date ("to" in a date range is no recipient).
func canAddress(schema any) bool {
	m := asMap(schema)
	if m == nil {
		return true
	}
	switch t, _ := m["type"].(string); t {
	case "number", "integer", "boolean":
		return false
	}
	switch f, _ := m["format"].(string); f {
	case "date", "date-time", "time", "duration":
		return false
	}
	return true
}

func asMap(v any) map[string]any {
	switch x := v.(type) {
	case map[string]any:
		return x
	case json.RawMessage:
		var m map[string]any
		if json.Unmarshal(x, &m) == nil {
			return m
		}
	case nil:
		return nil
	default:
		// A typed schema (*jsonschema.Schema): read it as JSON.
		b, err := json.Marshal(x)
		if err != nil {
			return nil
		}
		var m map[string]any
		if json.Unmarshal(b, &m) == nil {
			return m
		}
	}
	return nil
}

// nameParts splits a property name into lower-case words.
func nameParts(name string) []string {
	var parts []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			parts = append(parts, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	for i, r := range name {
		switch {
		case r == '_' || r == '-' || r == '.' || r == ' ':
			flush()
		case unicode.IsUpper(r) && i > 0:
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return parts
}

// destinationValue returns a description of the first argument value that
// is a destination: a URL with a host (any scheme) or an e-mail address.
func destinationValue(v any, depth int) string {
	if depth > maxDepth {
		return ""
	}
	switch x := v.(type) {
	case string:
		s := strings.TrimSpace(x)
		if u, err := url.Parse(s); err == nil && u.Scheme != "" && (u.Host != "" || u.Scheme == "mailto") {
			return "value is a " + u.Scheme + " URL"
		}
		if at := strings.LastIndexByte(s, '@'); at > 0 && !strings.ContainsAny(s, " \t\n") && strings.Contains(s[at:], ".") {
			return "value is an e-mail address"
		}
	case map[string]any:
		for _, e := range x {
			if d := destinationValue(e, depth+1); d != "" {
				return d
			}
		}
	case []any:
		for _, e := range x {
			if d := destinationValue(e, depth+1); d != "" {
				return d
			}
		}
	}
	return ""
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
