package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/egress"
)

func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Generate a locked-down config from what a session did",
		Args:  usageArgs(cobra.ArbitraryArgs),
		RunE:  groupRun,
	}
	var c common
	var session, output string
	gen := &cobra.Command{
		Use:   "generate",
		Short: "Lock a config to what one session used",
		Long: `From what one session did (the audit log), write a config that allows
exactly the servers and tools it used, pins their definitions, turns on the
cross-server rules, and lists what was blocked for a person to review.

--session takes a session id as "toolgate events" prints it, or any prefix
of it that matches one session only. Written to another folder, the config's
stdio servers get a "cwd" pointing back at the folder they ran in, so relative
commands and arguments still find their files.`,
		Example: `  toolgate policy generate --config config.json --session 3f9c --output locked/locked.json`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPolicy(&c, session, output, cmd.OutOrStdout())
		},
	}
	c.registerState(gen, "the config the session ran with")
	gen.Flags().StringVar(&session, "session", "", "the session to lock down: its id or a unique prefix (see toolgate events)")
	gen.Flags().StringVar(&output, "output", "", "where to write the generated config (- for stdout)")
	_ = gen.MarkFlagFilename("output", "json")
	cmd.AddCommand(gen)
	return cmd
}

// runPolicy writes the locked config of one session.
func runPolicy(c *common, session, output string, stdout io.Writer) error {
	if session == "" || output == "" {
		return usageError{errors.New("--session and --output are required")}
	}
	path, err := config.Find(c.config)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	// The original file, not the resolved config: $VAR references are
	// copied as written, so no secret value lands in the generated file.
	var orig struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
		// VSCodeServers is VS Code's name for mcpServers; the locked
		// config uses toolgate's own.
		VSCodeServers map[string]json.RawMessage `json:"servers"`
		Filters       map[string]json.RawMessage `json:"filters"`
		Search        json.RawMessage            `json:"search,omitempty"`
		Audit         json.RawMessage            `json:"audit,omitempty"`
	}
	if err := json.Unmarshal(raw, &orig); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	if orig.MCPServers == nil {
		orig.MCPServers = orig.VSCodeServers
	}
	apath, err := auditPath(path, c.stateDir)
	if err != nil {
		return err
	}

	session, err = resolveSession(apath, session)
	if err != nil {
		return err
	}

	type blocked struct {
		Tool   string `json:"tool"`
		Reason string `json:"reason"`
		Count  int    `json:"count"`
	}
	allowed := map[string]string{} // server__tool → definition hash
	servers := map[string]bool{}
	blocks := map[string]*blocked{}
	found := false
	var first, last time.Time // the session's span
	err = audit.Read(apath, func(e *audit.Event) error {
		if e.Session == session {
			if first.IsZero() {
				first = e.Time
			}
			last = e.Time
		}
		if e.Session != session || e.Type != audit.ToolCallIntercepted {
			return nil
		}
		found = true
		name := e.Server + "__" + e.Tool
		switch e.Action {
		case "allow":
			h, _ := e.Fields["tool_hash"].(string)
			allowed[name] = h
			servers[e.Server] = true
		case "block":
			k := name + "\x00" + e.Reason
			if blocks[k] == nil {
				blocks[k] = &blocked{Tool: name, Reason: e.Reason}
			}
			blocks[k].Count++
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("no call decisions for session %q in %s (list sessions with `toolgate events`)", session, apath)
	}

	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	used, refused, err := learnEgress(apath, servers, first, last)
	if err != nil {
		return err
	}
	out := map[string]any{}
	ms := map[string]json.RawMessage{}
	locked := 0
	for s := range servers {
		r, ok := orig.MCPServers[s]
		if !ok {
			continue
		}
		if output != "-" {
			if r, err = relocateServer(r, cfg.Servers[s], filepath.Dir(output)); err != nil {
				return fmt.Errorf("%s: mcpServers.%s: %v", path, s, err)
			}
		}
		if sc := cfg.Servers[s]; sc != nil && sc.EgressOn() {
			if r, err = lockEgress(r, sc.Egress, used[s]); err != nil {
				return fmt.Errorf("%s: mcpServers.%s: %v", path, s, err)
			}
			locked++
		}
		ms[s] = r
	}
	out["mcpServers"] = ms
	filters := map[string]any{}
	for k, v := range orig.Filters {
		filters[k] = v
	}
	names := make([]string, 0, len(allowed))
	for n := range allowed {
		names = append(names, n)
	}
	sort.Strings(names)
	srv := make([]string, 0, len(servers))
	for s := range servers {
		srv = append(srv, s)
	}
	sort.Strings(srv)
	filters["access_control"] = map[string]any{"allow_servers": srv, "allow": names}
	pins := map[string]string{}
	for n, h := range allowed {
		if h != "" {
			pins[n] = h
		}
	}
	filters["version_pinning"] = map[string]any{"on_change": "block", "auto_trust_first": false, "pins": pins}
	filters["cross_server"] = map[string]any{
		"read_then_send":    map[string]any{"enabled": true},
		"cross_server_flow": map[string]any{"enabled": true, "action": "block"},
	}
	out["filters"] = filters
	if len(orig.Search) > 0 {
		out["search"] = orig.Search
	}
	if len(orig.Audit) > 0 {
		out["audit"] = orig.Audit
	}
	bl := make([]*blocked, 0, len(blocks))
	for _, b := range blocks {
		bl = append(bl, b)
	}
	sort.Slice(bl, func(i, j int) bool { return bl[i].Tool+bl[i].Reason < bl[j].Tool+bl[j].Reason })
	out["review"] = map[string]any{
		"generated_from": map[string]any{"session": session, "config": path, "audit": apath, "at": time.Now().UTC().Format(time.RFC3339)},
		"note":           "Blocked during the session; not allowed above. Add a tool to access_control.allow (and its pin) only after review.",
		"blocked_tools":  bl,
	}
	if len(refused) > 0 {
		out["review"].(map[string]any)["egress_refused"] = refused
		out["review"].(map[string]any)["egress_note"] = "Connections the servers' egress proxies refused during the session; not allowed above."
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if output == "-" {
		_, err = stdout.Write(b)
		return err
	}
	if err := os.WriteFile(output, b, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d tools on %d servers allowed and pinned, %d blocked tools listed for review\n", output, len(names), len(srv), len(bl))
	if locked > 0 {
		fmt.Fprintf(stdout, "egress: %d server(s) locked to the hosts they used (enforce mode), %d refused connection(s) listed for review\n", locked, len(refused))
	}
	return nil
}

// refusedConn is a connection an egress proxy refused, for review.
type refusedConn struct {
	Server string `json:"server"`
	Target string `json:"target"`
	Count  int    `json:"count"`
}

// learnEgress reads the network connections of the given servers recorded
// between from and to (a session's span: connections carry no session, a
// server's process serves them all): the host:port each used, and what
// their proxies refused.
func learnEgress(apath string, servers map[string]bool, from, to time.Time) (map[string][]string, []*refusedConn, error) {
	used := map[string]map[string]bool{}
	refused := map[string]*refusedConn{}
	err := audit.Read(apath, func(e *audit.Event) error {
		if e.Type != audit.NetworkConnection || !servers[e.Server] {
			return nil
		}
		// Recorded when the connection ended; it counts for the session
		// if it started within it (a kept-alive tunnel outlives calls).
		ms := number(e.Fields["duration_ms"])
		if start := e.Time.Add(-time.Duration(ms) * time.Millisecond); start.Before(from) || start.After(to) {
			return nil
		}
		host, _ := e.Fields["host"].(string)
		port := number(e.Fields["port"])
		if host == "" || port <= 0 || port > 65535 {
			return nil
		}
		target := net.JoinHostPort(host, strconv.Itoa(int(port)))
		switch e.Action {
		case "allow":
			if used[e.Server] == nil {
				used[e.Server] = map[string]bool{}
			}
			used[e.Server][target] = true
		case "block":
			k := e.Server + "\x00" + target
			if refused[k] == nil {
				refused[k] = &refusedConn{Server: e.Server, Target: target}
			}
			refused[k].Count++
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	out := map[string][]string{}
	for s, set := range used {
		for t := range set {
			out[s] = append(out[s], t)
		}
		sort.Strings(out[s])
	}
	rl := make([]*refusedConn, 0, len(refused))
	for _, r := range refused {
		rl = append(rl, r)
	}
	sort.Slice(rl, func(i, j int) bool { return rl[i].Server+rl[i].Target < rl[j].Server+rl[j].Target })
	return out, rl, nil
}

// number reads a JSON number from an audit record's fields (0 if it is
// not one).
func number(v any) float64 {
	switch n := v.(type) {
	case float64:
		return n
	case json.Number:
		f, _ := n.Float64()
		return f
	}
	return 0
}

// lockEgress sets a server entry's egress to enforce mode with exactly the
// hosts it used (none: no network at all).
func lockEgress(raw json.RawMessage, e *config.Egress, hosts []string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if hosts == nil {
		hosts = []string{}
	}
	eg := map[string]any{"mode": egress.ModeEnforce, "allow": hosts}
	if e.Fallback != "" {
		eg["fallback"] = e.Fallback
	}
	b, err := json.Marshal(eg)
	if err != nil {
		return nil, err
	}
	m["egress"] = b
	return json.Marshal(m)
}

// relocateServer adjusts one stdio server entry for a config written to
// newDir. A stdio server runs in its cwd (default: its config's folder), and
// a relative command or argument means a file there; pointing cwd at that
// same folder, as seen from newDir, keeps every one of them meaning the same
// file without guessing which arguments are paths.
func relocateServer(raw json.RawMessage, s *config.Server, newDir string) (json.RawMessage, error) {
	if s == nil || s.Command == "" || s.Dir == "" {
		return raw, nil
	}
	abs, err := filepath.Abs(newDir)
	if err != nil {
		return nil, err
	}
	cwd := s.Dir
	if rel, err := filepath.Rel(abs, s.Dir); err == nil {
		cwd = rel
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if cwd == "." {
		delete(m, "cwd")
	} else {
		b, _ := json.Marshal(cwd)
		m["cwd"] = b
	}
	return json.Marshal(m)
}
