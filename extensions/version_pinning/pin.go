// Package pin is the version_pinning extension: it defends against rug
// pulls, a server that changes a tool's definition after it was trusted.
// Each tool's definition (name, description, input schema, annotations, in
// canonical JSON) is hashed when the server's tools are listed and compared
// with the hash pinned in pins.json in the state directory. A tool seen for
// the first time is pinned silently (auto_trust_first). A definition that
// differs from its pin, after a reconnect, a tools/list_changed or a
// restart of the gateway, is handled per on_change: calls refused with a
// message naming the tool and both hashes (block), recorded and allowed
// (alert), or ignored (allow). Pins survive restarts and are managed with
// `toolgate pins`.
//
// With pin_binary the executable of every stdio server is pinned the same
// way, by the SHA-256 of its content and its absolute path, through
// ResolveCommand (see its documentation for the hook it needs).
package pin

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/state"
)

// Key is the filters config key.
const Key = "version_pinning"

func init() { extension.Register(Key, FromConfig) }

// New builds the extension from its raw config, decoded strictly.
var New = extension.ConfigFactory(FromConfig)

// on_change values.
const (
	Block = "block"
	Alert = "alert"
	Allow = "allow"
)

// Config is the version_pinning object.
type Config struct {
	// OnChange is block (default), alert or allow.
	OnChange string `json:"on_change"`
	// AutoTrustFirst pins a tool's definition silently the first time it
	// is seen (default true). Off, an unpinned tool is handled like a
	// changed one until it is trusted with `toolgate pins trust`.
	AutoTrustFirst *bool `json:"auto_trust_first"`
	// PinBinary pins the executable of every stdio server (default false).
	PinBinary bool `json:"pin_binary"`
	// Pins are trusted definition hashes by qualified name (server__tool),
	// written into the pin store at startup over what it holds; `toolgate
	// policy generate` writes them.
	Pins map[string]string `json:"pins"`
}

// Pinner is the extension.
type Pinner struct {
	onChange  string
	autoTrust bool
	pinBinary bool

	store *Store
	pins  map[string]string
	emit  func(context.Context, extension.Event)
	log   *slog.Logger
	now   func() time.Time

	mu       sync.Mutex
	hashes   map[string]map[*mcp.Tool]string // server → its last listed definitions' hashes, by pointer (the catalogue's)
	called   map[*mcp.Tool]string            // hashes of definitions calls carried that listing did not (see hashOf)
	reported map[string][]string             // server\x00tool → definitions recorded as detections, oldest first
}

// remembered is how many differing definitions per tool are remembered as
// recorded, so a server flipping a definition back and forth is recorded
// once per definition, not once per listing.
const remembered = 8

// New decodes the config strictly. Construction has no side effects.
func FromConfig(cfg Config) (extension.Extension, error) {
	p := &Pinner{onChange: Block, autoTrust: cfg.AutoTrustFirst == nil || *cfg.AutoTrustFirst, pinBinary: cfg.PinBinary, pins: cfg.Pins, now: time.Now, hashes: map[string]map[*mcp.Tool]string{}, reported: map[string][]string{}}
	for q, h := range cfg.Pins {
		if server, tool, ok := strings.Cut(q, "__"); !ok || server == "" || tool == "" {
			return nil, fmt.Errorf("pins: %q is not a qualified tool name (server__tool)", q)
		}
		if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
			return nil, fmt.Errorf("pins.%s: %q is not a SHA-256 hex digest", q, h)
		}
	}
	switch cfg.OnChange {
	case "":
	case Block, Alert, Allow:
		p.onChange = cfg.OnChange
	default:
		return nil, fmt.Errorf("on_change %q: want \"block\", \"alert\" or \"allow\"", cfg.OnChange)
	}
	return p, nil
}

func (*Pinner) ID() string             { return "dev.toolgate/version_pinning" }
func (*Pinner) Phase() extension.Phase { return extension.PhaseAuthorize }

// Provision opens the pin store in the state directory and checks it reads.
func (p *Pinner) Provision(ctx context.Context, h extension.Host) error {
	p.emit, p.log = h.Emit, h.Logger
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	// With a shared state backend the pins live in Redis: a pin made or
	// trusted on one replica counts on all.
	if b := state.From(ctx); b != nil {
		p.store = NewSharedStore(b)
	} else {
		if h.StateDir == "" {
			p.log.Warn("no state directory: pins are kept in memory and do not survive a restart")
		}
		p.store = NewStore(h.StateDir)
	}
	if _, err := p.store.Current(); err != nil {
		return err
	}
	if len(p.pins) == 0 {
		return nil
	}
	now := p.now().UTC()
	return p.store.Update(func(f *File) (bool, error) {
		changed := false
		for q, h := range p.pins {
			server, tool, _ := strings.Cut(q, "__")
			if cur := f.Tool(server, tool); cur == nil || cur.Hash != h {
				f.SetTool(server, tool, &ToolPin{Hash: h, PinnedAt: &now})
				changed = true
			}
		}
		return changed, nil
	})
}

func (p *Pinner) FilterList(ctx context.Context, req *extension.ListRequest, tools []*mcp.Tool) ([]*mcp.Tool, error) {
	return p.list(ctx, req, tools)
}
func (p *Pinner) WrapCall(next extension.CallHandler) extension.CallHandler {
	return extension.Before(p.check)(next)
}

// Close stops a shared store's listening.
func (p *Pinner) Close() error {
	if p.store != nil {
		return p.store.Close()
	}
	return nil
}

// Store is the pin store (for tests and tools).
func (p *Pinner) Store() *Store { return p.store }

// change is one tool whose definition is not its pin, found by list.
type change struct {
	tool, status, pinned, now string
}

// list pins new tools and records definitions that differ from their pins.
// It never drops a tool: a changed tool stays searchable, so that calling
// it explains the refusal.
func (p *Pinner) list(ctx context.Context, req *extension.ListRequest, tools []*mcp.Tool) ([]*mcp.Tool, error) {
	hashes := make(map[string]string, len(tools))
	defs := make(map[string]*mcp.Tool, len(tools))
	byDef := make(map[*mcp.Tool]string, len(tools))
	for _, t := range tools {
		if t == nil || t.Name == "" {
			continue
		}
		h := Hash(t)
		hashes[t.Name], defs[t.Name], byDef[t] = h, t, h
	}
	p.mu.Lock()
	p.hashes[req.ServerName] = byDef
	p.mu.Unlock()

	now := p.now().UTC()
	var changes, held []change
	err := p.store.Update(func(f *File) (bool, error) {
		changes, held = changes[:0], held[:0]
		changed := false
		for name, h := range hashes {
			pin := f.Tool(req.ServerName, name)
			switch {
			case (pin == nil || pin.Hash == "") && !p.autoTrust:
				held = append(held, change{name, StatusNotPinned, "", h})
			case pin != nil && pin.Hash != "" && pin.Hash != h:
				held = append(held, change{name, StatusMismatch, pin.Hash, h})
			}
			switch {
			case pin == nil || pin.Hash == "":
				if p.autoTrust {
					f.SetTool(req.ServerName, name, &ToolPin{Hash: h, Definition: Canonical(defs[name]), PinnedAt: &now})
					changed = true
					continue
				}
				if pin == nil {
					pin = &ToolPin{}
					f.SetTool(req.ServerName, name, pin)
					changed = true
				}
				if pin.Observed == nil || pin.Observed.Hash != h {
					pin.Observed = &Observation{Hash: h, Definition: Canonical(defs[name]), SeenAt: now}
					changes = append(changes, change{name, StatusNotPinned, "", h})
					changed = true
				}
			case pin.Hash == h:
				if pin.Observed != nil {
					pin.Observed = nil // back to the trusted definition
					changed = true
				}
			default:
				if pin.Observed == nil || pin.Observed.Hash != h {
					pin.Observed = &Observation{Hash: h, Definition: Canonical(defs[name]), SeenAt: now}
					changes = append(changes, change{name, StatusMismatch, pin.Hash, h})
					changed = true
				}
			}
		}
		return changed, nil
	})
	if err != nil {
		// The tools stay listed; calls are checked against the pins read
		// at call time, and fail closed if those cannot be read.
		p.log.Error("pins not updated", "server", req.ServerName, "error", err)
	}
	if p.onChange == Allow {
		return tools, nil
	}
	p.mu.Lock()
	for k := range p.reported {
		if server, tool, _ := strings.Cut(k, "\x00"); server == req.ServerName && hashes[tool] == "" {
			delete(p.reported, k) // no longer listed
		}
	}
	p.mu.Unlock()
	if p.onChange == Block {
		slices.SortFunc(held, func(a, b change) int { return strings.Compare(a.tool, b.tool) })
		for _, c := range held {
			req.Withhold(c.tool, Key+"."+map[string]string{StatusNotPinned: "not_pinned", StatusMismatch: "on_change"}[c.status], publicReason(req.ServerName, c.tool, c.status))
		}
	}
	for _, c := range changes {
		if !p.firstReport(req.ServerName, c.tool, c.now) {
			continue
		}
		p.log.Warn("tool definition differs from its pin", "server", req.ServerName, "tool", c.tool, "status", c.status, "pinned_hash", c.pinned, "new_hash", c.now, "on_change", p.onChange)
		p.emit(ctx, extension.Event{
			Type: audit.Detection, Server: req.ServerName, Tool: c.tool, Action: p.onChange, Reason: Key,
			Fields: map[string]any{
				"detection_type": "version_pin", "severity": "critical", "status": c.status,
				"pinned_hash": c.pinned, "new_hash": c.now, "run_time": req.RunTime,
				"description": describe(req.ServerName, c.tool, c.status),
			},
		})
	}
	return tools, nil
}

// firstReport reports whether the definition hash of server's tool is
// recorded for the first time, and remembers it.
func (p *Pinner) firstReport(server, tool, hash string) bool {
	k := server + "\x00" + tool
	p.mu.Lock()
	defer p.mu.Unlock()
	hs := p.reported[k]
	if slices.Contains(hs, hash) {
		return false
	}
	if len(hs) >= remembered {
		hs = hs[1:]
	}
	p.reported[k] = append(hs, hash)
	return true
}

// publicReason tells the model that loaded a server why calls to a tool
// will be refused, and what the user can do.
func publicReason(server, tool, status string) string {
	trust := fmt.Sprintf("toolgate pins trust --server %s --tool %s", server, tool)
	if status == StatusNotPinned {
		return fmt.Sprintf("its definition is not pinned, so calls to it are refused until the user reviews and pins it (`%s`)", trust)
	}
	return fmt.Sprintf("its definition changed since it was pinned, so calls to it are refused until the user reviews the change (`toolgate pins diff --server %s --tool %s`) and accepts it (`%s`)", server, tool, trust)
}

func describe(server, tool, status string) string {
	if status == StatusNotPinned {
		return fmt.Sprintf("tool %q of server %q is not pinned", tool, server)
	}
	return fmt.Sprintf("the definition of tool %q of server %q changed since it was pinned", tool, server)
}

// calledCache bounds Pinner.called; past it the cache starts again.
const calledCache = 1024

// hashDef is Hash (a variable so a test can count the hashings).
var hashDef = Hash

// hashOf returns the hash of a definition: computed at list time for the
// pointers listing saw, and once per pointer for the others (the
// catalogue hands calls the definitions it decoded from its store, not
// the listed ones). Definitions are never modified (CallRequest.Def), so
// a pointer's hash stays its hash; a changed definition is a new pointer.
func (p *Pinner) hashOf(server string, d *mcp.Tool) string {
	p.mu.Lock()
	h, ok := p.hashes[server][d]
	if !ok {
		h, ok = p.called[d]
	}
	p.mu.Unlock()
	if ok {
		return h
	}
	h = hashDef(d)
	p.mu.Lock()
	if p.called == nil || len(p.called) >= calledCache {
		p.called = make(map[*mcp.Tool]string)
	}
	p.called[d] = h
	p.mu.Unlock()
	return h
}

// unreadable is the refusal of a call whose pin could not be read: one
// naming Redis when the shared store is unreachable, else err itself (a
// filter failure, refused with a generic message).
func (p *Pinner) unreadable(c *extension.CallRequest, err error) error {
	if !state.IsUnavailable(err) {
		return err
	}
	return &extension.Denial{
		Rule:   Key + ".state_unavailable",
		Reason: fmt.Sprintf("the pinned definition of tool %q of server %q could not be checked because the shared state store (Redis) is unreachable, so the call was not made; retry shortly", c.Tool, c.ServerName),
		Detail: err.Error(),
		Code:   extension.CodePermissionDenied,
	}
}

// check refuses (block) a call to a tool whose definition is not its pin.
func (p *Pinner) check(ctx context.Context, c *extension.CallRequest) error {
	if p.onChange == Allow || c.Def == nil {
		return nil
	}
	h := p.hashOf(c.ServerName, c.Def)
	f, err := p.store.Current()
	if err != nil {
		return p.unreadable(c, err) // fail closed: the pins cannot be read
	}
	pin := f.Tool(c.ServerName, c.Tool)
	if pin != nil && pin.Hash == h {
		return nil
	}
	// About to refuse or to pin: decide on the file as it is now, so that a
	// `toolgate pins trust` run a moment ago counts.
	if f, err = p.store.Latest(); err != nil {
		return p.unreadable(c, err)
	}
	pin = f.Tool(c.ServerName, c.Tool)
	switch {
	case pin != nil && pin.Hash == h:
		return nil
	case (pin == nil || pin.Hash == "") && p.autoTrust:
		// Reset while running (`pins reset`): trust what is served now.
		now := p.now().UTC()
		return p.store.Update(func(f *File) (bool, error) {
			if cur := f.Tool(c.ServerName, c.Tool); cur != nil && cur.Hash != "" {
				return false, nil
			}
			f.SetTool(c.ServerName, c.Tool, &ToolPin{Hash: h, Definition: Canonical(c.Def), PinnedAt: &now})
			return true, nil
		})
	case p.onChange == Alert:
		return nil
	}
	trust := fmt.Sprintf("toolgate pins trust --server %s --tool %s", c.ServerName, c.Tool)
	if pin == nil || pin.Hash == "" {
		return &extension.Denial{
			Rule: Key + ".not_pinned",
			Reason: fmt.Sprintf("tool %q of server %q has no pinned definition (pinned: none, current: sha256:%s), so it is blocked until the user reviews and pins it (`%s`)",
				c.Tool, c.ServerName, h, trust),
			Code: extension.CodePermissionDenied,
		}
	}
	return &extension.Denial{
		Rule: Key + ".on_change",
		Reason: fmt.Sprintf("the definition of tool %q of server %q changed since it was pinned (pinned: sha256:%s, current: sha256:%s), so it is blocked; tell the user, who can review the change with `toolgate pins diff --server %s --tool %s` and accept it with `%s`",
			c.Tool, c.ServerName, pin.Hash, h, c.ServerName, c.Tool, trust),
		Code: extension.CodePermissionDenied,
	}
}
