package config

import "fmt"

// Defaults of the "limits" object. A server's tool list is the model's
// whole view of it, so these bound what one upstream can make the gateway
// hold, index, pin and audit. The largest public servers list under 200
// tools with descriptions under 4 KiB; the defaults leave ample room.
const (
	DefaultMaxToolsPerServer    = 1000
	DefaultMaxTools             = 10000
	DefaultMaxToolNameBytes     = 128 // the MCP spec's recommended maximum
	DefaultMaxDescriptionBytes  = 16 << 10
	DefaultMaxSchemaBytes       = 64 << 10
	DefaultListChangedPerMinute = 6
	// ListChangedBurst is how many re-lists a server's list_changed
	// notifications may cause back to back before the per-minute rate
	// applies.
	ListChangedBurst = 3
)

// Limits is the "limits" object. Zero fields take their defaults (see
// Resolved); every value must be positive.
type Limits struct {
	// MaxToolsPerServer: a server listing more tools is refused as a whole.
	MaxToolsPerServer int `json:"max_tools_per_server,omitempty"`
	// MaxTools: a server whose tools would take the catalogue past this is
	// refused as a whole.
	MaxTools int `json:"max_tools,omitempty"`
	// MaxToolNameBytes, MaxDescriptionBytes and MaxSchemaBytes bound one
	// tool definition: its name; its description and title; its input
	// schema, output schema, annotations and _meta, each as JSON. A tool
	// over any of them is left out, the server's others are kept.
	MaxToolNameBytes    int `json:"max_tool_name_bytes,omitempty"`
	MaxDescriptionBytes int `json:"max_description_bytes,omitempty"`
	MaxSchemaBytes      int `json:"max_schema_bytes,omitempty"`
	// ListChangedPerMinute is how many re-lists per minute a server's
	// notifications/tools/list_changed can cause (after a burst of
	// ListChangedBurst); notifications beyond it are folded into the next
	// re-list.
	ListChangedPerMinute int `json:"list_changed_per_minute,omitempty"`
}

// Resolved returns l with its defaults filled in.
func (l Limits) Resolved() Limits {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.MaxToolsPerServer, DefaultMaxToolsPerServer)
	def(&l.MaxTools, DefaultMaxTools)
	def(&l.MaxToolNameBytes, DefaultMaxToolNameBytes)
	def(&l.MaxDescriptionBytes, DefaultMaxDescriptionBytes)
	def(&l.MaxSchemaBytes, DefaultMaxSchemaBytes)
	def(&l.ListChangedPerMinute, DefaultListChangedPerMinute)
	return l
}

func (l Limits) validate() error {
	for _, f := range []struct {
		key string
		v   int
	}{
		{"max_tools_per_server", l.MaxToolsPerServer},
		{"max_tools", l.MaxTools},
		{"max_tool_name_bytes", l.MaxToolNameBytes},
		{"max_description_bytes", l.MaxDescriptionBytes},
		{"max_schema_bytes", l.MaxSchemaBytes},
		{"list_changed_per_minute", l.ListChangedPerMinute},
	} {
		if f.v < 0 {
			return fmt.Errorf("limits.%s is %d; want a positive number (or leave it out for the default)", f.key, f.v)
		}
	}
	if r := l.Resolved(); r.MaxToolsPerServer > r.MaxTools {
		def := ""
		if l.MaxTools == 0 {
			def = ", the default"
		}
		return fmt.Errorf("limits.max_tools_per_server (%d) is more than limits.max_tools (%d%s)", r.MaxToolsPerServer, r.MaxTools, def)
	}
	return nil
}
