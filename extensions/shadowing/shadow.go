// Package shadow is the shadowing extension: it catches a server that tries
// to take over another server's tool. Namespacing keeps a__read_file and
// b__read_file apart, but an LLM choosing by name and description can still
// be steered to the impostor. Two signs are checked when a server's tools
// are listed, before they are catalogued:
//
//   - a name collision: a tool whose name, after normalisation (case,
//     '-', '_', '.', look-alike letters), equals a tool another server
//     listed first;
//   - a description claim: a description that says it replaces, overrides
//     or is to be preferred over a tool (or server) another server offers.
//
// The newcomer's offending tool is then dropped (action "block", the default
// for servers loaded at run time) or kept and reported (action "alert", the
// default for configured servers). Every detection is a "detection" event.
package shadow

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/text/unicode/norm"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/glob"
)

// Key is the filters config key.
const Key = "shadowing"

func init() { extension.Register(Key, FromConfig) }

// New builds the extension from its raw config, decoded strictly.
var New = extension.ConfigFactory(FromConfig)

// Actions.
const (
	Block = "block"
	Alert = "alert"
)

// Config is the shadowing object.
type Config struct {
	// Configured is the action for servers from the config (default alert).
	Configured string `json:"configured"`
	// RunTime is the action for servers loaded with load_mcp_server
	// (default block).
	RunTime string `json:"run_time"`
	// Descriptions turns the description-claim check on (default true).
	Descriptions *bool `json:"descriptions"`
	// Allow lists qualified-name globs (server__tool) exempt from both
	// checks, for deliberate overlaps such as two filesystem servers.
	Allow []string `json:"allow"`
}

// Shadow is the extension.
type Shadow struct {
	configured, runTime string
	descriptions        bool
	allow               []string

	emit  func(context.Context, extension.Event)
	tools func() []extension.ToolRef
	log   *slog.Logger

	mu       sync.Mutex
	seq      uint64
	claims   map[string][]claim         // normalised name → who offers it
	byServer map[string]map[string]bool // server → normalised names it claims
	reported map[string][]string        // server\x00tool → finding keys recorded, oldest first
}

// claim is one server's tool under a normalised name; the lowest seq
// among a name's claims listed it first.
type claim struct {
	server, tool, description string
	seq                       uint64
}

// New decodes the config strictly. Construction has no side effects.
func FromConfig(cfg Config) (extension.Extension, error) {
	s := &Shadow{configured: Alert, runTime: Block, descriptions: cfg.Descriptions == nil || *cfg.Descriptions,
		claims: map[string][]claim{}, byServer: map[string]map[string]bool{}, reported: map[string][]string{}}
	for _, f := range []struct {
		name string
		v    string
		dst  *string
	}{{"configured", cfg.Configured, &s.configured}, {"run_time", cfg.RunTime, &s.runTime}} {
		switch f.v {
		case "":
		case Block, Alert:
			*f.dst = f.v
		default:
			return nil, fmt.Errorf("%s %q: want \"block\" or \"alert\"", f.name, f.v)
		}
	}
	for i, p := range cfg.Allow {
		if !strings.Contains(p, "__") {
			return nil, fmt.Errorf("allow[%d] %q: want a qualified-name glob such as \"fs2__read_file\" or \"fs2__*\"", i, p)
		}
		s.allow = append(s.allow, strings.ToLower(p))
	}
	return s, nil
}

func (*Shadow) ID() string             { return "dev.toolgate/shadowing" }
func (*Shadow) Phase() extension.Phase { return extension.PhaseAuthorize }

func (s *Shadow) Provision(_ context.Context, h extension.Host) error {
	s.emit, s.tools, s.log = h.Emit, h.Tools, h.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return nil
}

func (s *Shadow) FilterList(ctx context.Context, req *extension.ListRequest, tools []*mcp.Tool) ([]*mcp.Tool, error) {
	return s.list(ctx, req, tools)
}

// remembered is how many distinct findings per tool are remembered as
// recorded.
const remembered = 8

// Finding is one shadowing detection on a newcomer's tool.
type Finding struct {
	// Kind is "name_collision" or "description_claim".
	Kind string
	// Server and Tool are what is shadowed (Tool is empty when a
	// description names only a server).
	Server, Tool string
	// Context is the claiming sentence (description claims only).
	Context string
}

func (f Finding) severity() string {
	if f.Kind == "name_collision" {
		return "critical"
	}
	return "high"
}

// publicReason says why a tool was blocked, for the model that loaded its
// server: the other server and tool by name, never the quoted text.
func (f Finding) publicReason() string {
	if f.Kind == "name_collision" {
		return fmt.Sprintf("its name collides with tool %s, listed earlier, so it could impersonate that tool", f.target())
	}
	return fmt.Sprintf("its description claims to replace %s", f.target())
}

func (f Finding) target() string {
	if f.Tool == "" {
		return fmt.Sprintf("server %q", f.Server)
	}
	return fmt.Sprintf("%q of server %q", f.Tool, f.Server)
}

func (s *Shadow) allowed(server, tool string) bool {
	q := strings.ToLower(server + "__" + tool)
	for _, p := range s.allow {
		if glob.Match(p, q) {
			return true
		}
	}
	return false
}

// list checks a server's tools against every other server's and drops or
// reports the newcomer's shadowing tools.
func (s *Shadow) list(ctx context.Context, req *extension.ListRequest, tools []*mcp.Tool) ([]*mcp.Tool, error) {
	var snapshot []extension.ToolRef
	if s.tools != nil {
		snapshot = s.tools()
	}
	action := s.configured
	if req.RunTime {
		action = s.runTime
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	// Tools in the catalogue that this extension never saw listed (a
	// rebuilt pipeline) count as listed before anything else.
	for _, r := range snapshot {
		if r.Server == req.ServerName || r.Def == nil {
			continue
		}
		n := Normalize(r.Def.Name)
		if !s.byServer[r.Server][n] {
			s.addClaim(n, claim{server: r.Server, tool: r.Def.Name, description: r.Def.Description})
		}
	}
	own := map[string]bool{}
	for _, t := range tools {
		if t != nil {
			own[Normalize(t.Name)] = true
		}
	}
	var others []claim // every other server's tool, for description claims
	for _, cs := range s.claims {
		for _, c := range cs {
			if c.server != req.ServerName {
				others = append(others, c)
			}
		}
	}
	sort.Slice(others, func(i, j int) bool { return others[i].seq < others[j].seq })

	kept := tools[:0:0]
	claimed := map[string]bool{}
	seen := map[string]bool{}
	for _, t := range tools {
		if t == nil {
			kept = append(kept, t)
			continue
		}
		n := Normalize(t.Name)
		seen[req.ServerName+"\x00"+t.Name] = true
		var findings []Finding
		if !s.allowed(req.ServerName, t.Name) {
			findings = s.check(req.ServerName, t, n, own, others)
		}
		s.report(ctx, req, t, findings, action)
		if len(findings) > 0 && action == Block {
			f := findings[0]
			req.Withhold(t.Name, Key+"."+f.Kind, f.publicReason())
			continue
		}
		kept = append(kept, t)
		claimed[n] = true
		if !s.byServer[req.ServerName][n] {
			s.addClaim(n, claim{server: req.ServerName, tool: t.Name, description: t.Description})
		} else {
			s.updateClaim(n, req.ServerName, t)
		}
	}
	// Names this server no longer offers (or was blocked from) are freed.
	for n := range s.byServer[req.ServerName] {
		if !claimed[n] {
			s.dropClaim(n, req.ServerName)
		}
	}
	for k := range s.reported {
		if strings.HasPrefix(k, req.ServerName+"\x00") && !seen[k] {
			delete(s.reported, k)
		}
	}
	return kept, nil
}

// check returns the shadowing findings on tool t (normalised name n) of
// server against the other servers' claims. s.mu is held.
func (s *Shadow) check(server string, t *mcp.Tool, n string, own map[string]bool, others []claim) []Finding {
	var out []Finding
	mine, has := s.claimOf(n, server)
	for _, c := range s.claims[n] {
		if c.server == server || (has && c.seq > mine.seq) {
			continue
		}
		out = append(out, Finding{Kind: "name_collision", Server: c.server, Tool: c.tool})
		break
	}
	if s.descriptions {
		if f, ok := DescriptionClaim(t.Description, server, own, others); ok {
			out = append(out, f)
		}
	}
	return out
}

// report logs and records findings once per tool and definition.
func (s *Shadow) report(ctx context.Context, req *extension.ListRequest, t *mcp.Tool, findings []Finding, action string) {
	k := req.ServerName + "\x00" + t.Name
	if len(findings) == 0 {
		return
	}
	var sig strings.Builder
	sig.WriteString(action)
	for _, f := range findings {
		fmt.Fprintf(&sig, "|%s/%s/%s/%s", f.Kind, f.Server, f.Tool, f.Context)
	}
	// A server flipping a definition between a claim and none, or between
	// two claims, is recorded once per finding, not once per listing.
	sigs := s.reported[k]
	if slices.Contains(sigs, sig.String()) {
		return
	}
	if len(sigs) >= remembered {
		sigs = sigs[1:]
	}
	s.reported[k] = append(sigs, sig.String())
	for _, f := range findings {
		msg := "tool shadows another server's tool"
		if f.Kind == "description_claim" {
			msg = "tool description claims to replace another server's tool"
		}
		s.log.Warn(msg, "server", req.ServerName, "tool", t.Name, "shadowed_server", f.Server, "shadowed_tool", f.Tool, "action", action)
		fields := map[string]any{
			"detection_type":  "tool_shadowing",
			"rule":            Key + "." + f.Kind,
			"severity":        f.severity(),
			"shadowed_server": f.Server,
			"run_time":        req.RunTime,
			"description":     fmt.Sprintf("%s: %q of server %q %s %s", f.Kind, t.Name, req.ServerName, verb(f.Kind), f.target()),
		}
		if f.Tool != "" {
			fields["shadowed_tool"] = f.Tool
		}
		if f.Context != "" {
			fields["context"] = f.Context
		}
		s.emit(ctx, extension.Event{Type: audit.Detection, Server: req.ServerName, Tool: t.Name, Action: action, Reason: Key + "." + f.Kind, Fields: fields})
	}
}

func verb(kind string) string {
	if kind == "name_collision" {
		return "collides with"
	}
	return "claims to replace"
}

func (s *Shadow) addClaim(n string, c claim) {
	s.seq++
	c.seq = s.seq
	s.claims[n] = append(s.claims[n], c)
	if s.byServer[c.server] == nil {
		s.byServer[c.server] = map[string]bool{}
	}
	s.byServer[c.server][n] = true
}

func (s *Shadow) claimOf(n, server string) (claim, bool) {
	for _, c := range s.claims[n] {
		if c.server == server {
			return c, true
		}
	}
	return claim{}, false
}

func (s *Shadow) updateClaim(n, server string, t *mcp.Tool) {
	for i, c := range s.claims[n] {
		if c.server == server {
			s.claims[n][i].tool, s.claims[n][i].description = t.Name, t.Description
		}
	}
}

func (s *Shadow) dropClaim(n, server string) {
	cs := s.claims[n][:0]
	for _, c := range s.claims[n] {
		if c.server != server {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		delete(s.claims, n)
	} else {
		s.claims[n] = cs
	}
	delete(s.byServer[server], n)
}

// confusables maps Cyrillic and Greek letters that render like Latin ones.
var confusables = map[rune]rune{
	'а': 'a', 'в': 'b', 'е': 'e', 'ё': 'e', 'к': 'k', 'м': 'm', 'н': 'h', 'о': 'o', 'р': 'p', 'с': 'c', 'т': 't',
	'у': 'y', 'х': 'x', 'і': 'i', 'ї': 'i', 'ј': 'j', 'ѕ': 's', 'ԁ': 'd', 'ɡ': 'g', 'ı': 'i',
	'α': 'a', 'β': 'b', 'ε': 'e', 'η': 'n', 'ι': 'i', 'κ': 'k', 'ν': 'v', 'ο': 'o', 'ρ': 'p', 'τ': 't', 'υ': 'u', 'χ': 'x',
}

// Normalize is the form two tool names must not share across servers:
// NFKC (full-width letters folded), lower case, Cyrillic and Greek
// look-alikes read as Latin, and the separators '-', '_', '.' and space
// removed, so read_file, Read-File, readFile and ｒｅａｄ_ｆｉｌｅ are one name.
func Normalize(name string) string {
	name = norm.NFKC.String(name)
	var b strings.Builder
	for _, r := range name {
		r = unicode.ToLower(r)
		if c, ok := confusables[r]; ok {
			r = c
		}
		switch {
		case r == '-' || r == '_' || r == '.' || unicode.IsSpace(r):
			continue
		case unicode.Is(unicode.Cf, r): // zero-width and other format characters
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// claimRE finds wording that puts a tool in another's place.
var claimRE = regexp.MustCompile(`(?i)\b(?:instead of|rather than|in place of|in lieu of|replac(?:e|es|ed|ing|ement (?:for|of))|supersed(?:e|es|ed|ing)|overrid(?:e|es|ing)|takes? precedence over|(?:is |are )?prefer(?:red|able)? (?:to|over)|prefer (?:this|me)|better than|(?:do not|don't|never|avoid|stop) (?:use|call|using|calling|invoke|invoking)|deprecated|obsolete|no longer (?:works|work|supported|safe)|(?:is|are) (?:broken|unsafe|compromised)|shadows?|(?:upgraded|improved|newer|new|fixed|official|updated) version of)\b`)

var sentenceRE = regexp.MustCompile(`[.!?;\n]+(?:\s|$)|\n`)

// DescriptionClaim reports whether description claims to replace, override
// or be preferred over a tool or a server among others (other servers'
// tools). A tool is mentioned by its name (or qualified name) as a whole
// word; a server by "NAME server", "NAME's", "NAME tool(s)" or "NAME__".
// Names that server itself offers (own, normalised) are not counted.
func DescriptionClaim(description, server string, own map[string]bool, others []claim) (Finding, bool) {
	if strings.TrimSpace(description) == "" || len(others) == 0 {
		return Finding{}, false
	}
	desc := norm.NFKC.String(description)
	for _, sent := range splitSentences(desc) {
		if !claimRE.MatchString(sent) {
			continue
		}
		low := strings.ToLower(sent)
		for _, c := range others {
			if c.server == server {
				continue
			}
			if !own[Normalize(c.tool)] && (mentions(low, strings.ToLower(c.tool)) || mentions(low, strings.ToLower(c.server+"__"+c.tool))) {
				return Finding{Kind: "description_claim", Server: c.server, Tool: c.tool, Context: excerpt(sent)}, true
			}
		}
		for _, c := range others {
			if c.server != server && mentionsServer(low, strings.ToLower(c.server)) {
				return Finding{Kind: "description_claim", Server: c.server, Context: excerpt(sent)}, true
			}
		}
	}
	return Finding{}, false
}

func splitSentences(s string) []string {
	var out []string
	last := 0
	for _, m := range sentenceRE.FindAllStringIndex(s, -1) {
		out = append(out, s[last:m[1]])
		last = m[1]
	}
	if last < len(s) {
		out = append(out, s[last:])
	}
	return out
}

func isNameRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-'
}

// mentions reports whether word occurs in s with no name character on
// either side.
func mentions(s, word string) bool {
	if word == "" {
		return false
	}
	for i := 0; ; {
		j := strings.Index(s[i:], word)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(word)
		before, after := rune(' '), rune(' ')
		if start > 0 {
			before = lastRune(s[:start])
		}
		if end < len(s) {
			after, _ = utf8.DecodeRuneInString(s[end:])
		}
		if !isNameRune(before) && !isNameRune(after) {
			return true
		}
		i = start + 1
	}
}

func lastRune(s string) rune {
	r, _ := utf8.DecodeLastRuneInString(s)
	return r
}

var serverSuffixes = []string{" server", " mcp", "'s ", "’s ", " tool", "__"}

// mentionsServer reports whether s refers to the server name: the name as a
// whole word followed by " server", " mcp", "'s", " tool" or "__".
func mentionsServer(s, name string) bool {
	s += " "
	for _, suf := range serverSuffixes {
		w := name + suf
		for i := 0; ; {
			j := strings.Index(s[i:], w)
			if j < 0 {
				break
			}
			if start := i + j; start == 0 || !isNameRune(lastRune(s[:start])) {
				return true
			}
			i += j + 1
		}
	}
	return false
}

// excerpt trims a sentence to about 50 characters for an event.
func excerpt(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= 50 {
		return s
	}
	return string(r[:49]) + "…"
}
