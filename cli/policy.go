package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/config"
)

// runPolicy implements `toolgate policy generate`: from what one session
// did (the audit log), write a config that allows exactly the servers and
// tools it used, pins their definitions, turns on the cross-server rules,
// and lists what was blocked for a person to review.
func runPolicy(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "generate" {
		return usageError{errors.New("usage: toolgate policy generate --config FILE --session S --output locked.json")}
	}
	fs := newFlagSet("policy generate", stderr)
	cfgFlag := fs.String("config", "", "the config the session ran with")
	state := fs.String("state-dir", "", "state directory (the audit log)")
	session := fs.String("session", "", "the session to lock down (see `toolgate events`)")
	output := fs.String("output", "", "where to write the generated config (- for stdout)")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if *session == "" || *output == "" {
		return usageError{errors.New("--session and --output are required")}
	}
	path, err := config.Find(*cfgFlag)
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
	apath, err := auditPath(path, *state)
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
	err = audit.Read(apath, func(e *audit.Event) error {
		if e.Session != *session || e.Type != audit.ToolCallIntercepted {
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
		return fmt.Errorf("no call decisions for session %q in %s (list sessions with `toolgate events`)", *session, apath)
	}

	out := map[string]any{}
	ms := map[string]json.RawMessage{}
	for s := range servers {
		if r, ok := orig.MCPServers[s]; ok {
			ms[s] = r
		}
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
		"generated_from": map[string]any{"session": *session, "config": path, "audit": apath, "at": time.Now().UTC().Format(time.RFC3339)},
		"note":           "Blocked during the session; not allowed above. Add a tool to access_control.allow (and its pin) only after review.",
		"blocked_tools":  bl,
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if *output == "-" {
		_, err = stdout.Write(b)
		return err
	}
	if err := os.WriteFile(*output, b, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d tools on %d servers allowed and pinned, %d blocked tools listed for review\n", *output, len(names), len(srv), len(bl))
	return nil
}
