package config

import (
	"errors"
	"fmt"
	"strings"
)

// Modes: what the gateway shows its client.
const (
	// ModeMeta: the meta-tools search_tools, call_tool and
	// load_mcp_server (default).
	ModeMeta = "meta"
	// ModePassthrough: a transparent, filtered MCP proxy of every upstream.
	ModePassthrough = "passthrough"
	// ModeHybrid: the meta-tools plus the pinned tools, listed directly.
	ModeHybrid = "hybrid"
)

// Exposure is the top-level "mode", "namespace" and "pinned_tools" keys.
type Exposure struct {
	// Mode is ModeMeta (default), ModePassthrough or ModeHybrid.
	Mode string `json:"mode,omitempty"`
	// Namespace false keeps upstream tool and prompt names unchanged in
	// passthrough mode; it needs exactly one enabled server. Default true:
	// names are server__name.
	Namespace *bool `json:"namespace,omitempty"`
	// PinnedTools are the qualified names (server__tool) hybrid mode lists
	// beside the meta-tools.
	PinnedTools []string `json:"pinned_tools,omitempty"`
}

// Namespaced reports whether passthrough names carry their server's name.
func (e Exposure) Namespaced() bool { return e.Namespace == nil || *e.Namespace }

// OnlyServer returns the name of the one enabled server, or "". A server
// disabled only because a variable is not set counts as enabled: the file
// means it, and un-namespaced names must not switch to another server
// when a token goes missing.
func (c *Config) OnlyServer() string {
	only := ""
	for n, s := range c.Servers {
		if s.Disabled && s.DisabledReason == "" {
			continue
		}
		if only != "" {
			return ""
		}
		only = n
	}
	return only
}

func (c *Config) validateExposure() error {
	switch c.Mode {
	case "":
		c.Mode = ModeMeta
	case ModeMeta, ModePassthrough, ModeHybrid:
	default:
		return fmt.Errorf("mode %q: want %q, %q or %q", c.Mode, ModeMeta, ModePassthrough, ModeHybrid)
	}
	if !c.Namespaced() {
		if c.Mode != ModePassthrough {
			return fmt.Errorf(`"namespace": false only applies to "mode": %q`, ModePassthrough)
		}
		if c.OnlyServer() == "" {
			return errors.New(`"namespace": false needs exactly one enabled server in mcpServers: with several, names could collide`)
		}
	}
	if len(c.PinnedTools) > 0 && c.Mode != ModeHybrid {
		return fmt.Errorf(`"pinned_tools" only applies to "mode": %q`, ModeHybrid)
	}
	for i, n := range c.PinnedTools {
		server, tool, ok := strings.Cut(n, "__")
		if !ok || server == "" || tool == "" {
			return fmt.Errorf("pinned_tools[%d]: %q is not a qualified name server__tool", i, n)
		}
		if _, known := c.Servers[server]; !known {
			return fmt.Errorf("pinned_tools[%d]: %q names server %q, which is not in mcpServers", i, n, server)
		}
	}
	return nil
}
