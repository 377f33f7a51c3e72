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
	return canonicalDefinition(d, CanonicalJSON(d.InputSchema))
}

// canonicalDefinition is CanonicalDefinition with the input schema already
// in canonical JSON.
func canonicalDefinition(d *mcp.Tool, schema json.RawMessage) json.RawMessage {
	ann := json.RawMessage("null")
	if d.Annotations != nil {
		ann = CanonicalJSON(d.Annotations)
	}
	b, _ := json.Marshal(map[string]any{"name": d.Name, "description": d.Description, "inputSchema": schema, "annotations": ann})
	return b
}

// DefinitionHash is the hex SHA-256 of a tool's canonical definition: the
// hash pins record and audit events carry as tool_hash.
func DefinitionHash(d *mcp.Tool) string {
	return DefinitionHashOf(d, CanonicalJSON(d.InputSchema))
}

// DefinitionHashOf is DefinitionHash with d's input schema already encoded
// by CanonicalJSON, for a caller that keeps that encoding (the catalogue
// stores it) and so need not encode the schema twice.
func DefinitionHashOf(d *mcp.Tool, schema json.RawMessage) string {
	sum := sha256.Sum256(canonicalDefinition(d, schema))
	return hex.EncodeToString(sum[:])
}

// CanonicalJSON encodes v with object keys sorted; "null" when it cannot
// be encoded. A value made only of what a JSON decoder makes (maps,
// slices, strings, float64, bool, nil), as an upstream's schema is, is
// encoded as it is; anything else (typed schemas, structs) is normalised
// through a map first.
func CanonicalJSON(v any) json.RawMessage {
	if native(v, 0) {
		if b, err := json.Marshal(v); err == nil {
			return b
		}
		return json.RawMessage("null")
	}
	var m any
	if b, err := json.Marshal(v); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// native reports whether v is made only of decoded JSON values, which
// encoding/json encodes canonically (map keys sorted).
func native(v any, depth int) bool {
	if depth > 64 {
		return false
	}
	switch x := v.(type) {
	case nil, string, float64, bool:
		return true
	case map[string]any:
		for _, e := range x {
			if !native(e, depth+1) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !native(e, depth+1) {
				return false
			}
		}
		return true
	}
	return false
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
