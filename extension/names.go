package extension

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/glob"
)

// Sep joins a server name and a tool name into a qualified name.
const Sep = "__"

// Qualify returns the qualified name server__tool.
func Qualify(server, tool string) string { return server + Sep + tool }

// Split splits a qualified name at its first "__". Server names never
// contain "__", so the first one is the boundary even when the tool's own
// name contains "__".
func Split(qualified string) (server, tool string, ok bool) {
	server, tool, ok = strings.Cut(qualified, Sep)
	if !ok || server == "" || tool == "" {
		return "", "", false
	}
	return server, tool, true
}

// CanonicalDefinition is a tool definition in the canonical JSON that
// DefinitionHash hashes: name, description, input schema and annotations,
// object keys sorted (encoding/json sorts map keys; the schema is
// normalised through a map).
func CanonicalDefinition(d *mcp.Tool) json.RawMessage {
	var schema any
	if b, err := json.Marshal(d.InputSchema); err == nil {
		_ = json.Unmarshal(b, &schema)
	}
	var ann any
	if d.Annotations != nil {
		if b, err := json.Marshal(d.Annotations); err == nil {
			_ = json.Unmarshal(b, &ann)
		}
	}
	b, _ := json.Marshal(map[string]any{"name": d.Name, "description": d.Description, "inputSchema": schema, "annotations": ann})
	return b
}

// DefinitionHash is the hex SHA-256 of a tool's canonical definition: the
// hash pins record and audit events carry as tool_hash.
func DefinitionHash(d *mcp.Tool) string {
	sum := sha256.Sum256(CanonicalDefinition(d))
	return hex.EncodeToString(sum[:])
}

// Event types an extension may emit (Event.Type), as they appear in the
// audit log and event stream.
const (
	EventToolSeen             = "tool_seen"
	EventToolChanged          = "tool_changed"
	EventToolCalled           = "tool_called"
	EventToolCallIntercepted  = "tool_call_intercepted"
	EventCrossServerBlocked   = "cross_server_blocked"
	EventDetection            = "detection"
	EventServerNameSimilar    = "server_name_similarity"
	EventOutputInspection     = "output_inspection"
	EventServerBinaryMismatch = "server_binary_mismatch"
	EventServerLoaded         = "server_loaded"
	EventServerLoadDenied     = "server_load_denied"
	EventSearch               = "search"
)

// MatchGlob reports whether name matches pattern in toolgate's one glob
// dialect, the one its config uses: '*' matches any run of characters, '?'
// one character, everything else itself; anchored at both ends.
func MatchGlob(pattern, name string) bool { return glob.Match(pattern, name) }
