package catalog

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits bound the catalogue. A zero field is no limit.
type Limits struct {
	// PerServer is the most tools one server may have; Total the most in
	// the whole catalogue.
	PerServer, Total int
	// NameBytes, DescriptionBytes and SchemaBytes bound one definition:
	// its name; its description and title; its input schema, output
	// schema, annotations and _meta, each as JSON.
	NameBytes, DescriptionBytes, SchemaBytes int
}

// Config keys the limits are set with, named in errors.
const (
	KeyPerServer        = "limits.max_tools_per_server"
	KeyTotal            = "limits.max_tools"
	KeyNameBytes        = "limits.max_tool_name_bytes"
	KeyDescriptionBytes = "limits.max_description_bytes"
	KeySchemaBytes      = "limits.max_schema_bytes"
)

// TooManyError refuses a server's whole tool list for its size.
type TooManyError struct {
	Server string
	// Listed is how many tools the server listed.
	Listed int
	// Key is the limit exceeded (KeyPerServer or KeyTotal), Limit its value.
	Key   string
	Limit int
	// Total is, for KeyTotal, how many tools the catalogue would have held.
	Total int
}

func (e *TooManyError) Error() string {
	if e.Key == KeyTotal {
		return fmt.Sprintf("server %q lists %d tools, which would make %d tools in all, more than %s (%d); none of its tools were added",
			e.Server, e.Listed, e.Total, e.Key, e.Limit)
	}
	return fmt.Sprintf("server %q lists %d tools, more than %s (%d); none of its tools were added", e.Server, e.Listed, e.Key, e.Limit)
}

// Rejected is a tool left out of the catalogue, with the reason.
type Rejected struct {
	Tool string
	// Rule is what rejected it, e.g. KeyDescriptionBytes or "catalog".
	Rule   string
	Reason string
}

// Admit checks a server's tool list before anything else sees it: the
// number of tools against PerServer (an error refusing the whole list),
// then each definition's name and sizes. It returns the tools that pass
// and, for the rest, why. Names are checked the way Update checks them
// (missing, duplicate, ambiguous qualified name).
func Admit(server string, defs []*mcp.Tool, l Limits) ([]*mcp.Tool, []Rejected, error) {
	return admit(server, defs, l, nil)
}

// admit is Admit for a caller that has already encoded each definition's
// input schema (schemas[i] for defs[i], as CanonicalJSON encodes it): the
// schema, the largest part of a definition, is then not encoded again
// just to be measured. nil schemas means encode them here.
func admit(server string, defs []*mcp.Tool, l Limits, schemas []json.RawMessage) ([]*mcp.Tool, []Rejected, error) {
	if l.PerServer > 0 && len(defs) > l.PerServer {
		return nil, nil, &TooManyError{Server: server, Listed: len(defs), Key: KeyPerServer, Limit: l.PerServer}
	}
	kept := make([]*mcp.Tool, 0, len(defs))
	var out []Rejected
	seen := make(map[string]bool, len(defs))
	for i, d := range defs {
		if d == nil || d.Name == "" {
			out = append(out, Rejected{Tool: "", Rule: "catalog", Reason: "a tool without a name"})
			continue
		}
		if l.NameBytes > 0 && len(d.Name) > l.NameBytes {
			// The name itself is not repeated: it is what is too long.
			out = append(out, Rejected{Tool: strings.ToValidUTF8(d.Name[:min(len(d.Name), l.NameBytes, 40)], "") + "…", Rule: KeyNameBytes,
				Reason: fmt.Sprintf("its name is %d bytes, more than %s (%d)", len(d.Name), KeyNameBytes, l.NameBytes)})
			continue
		}
		if s2, t2, ok := Split(Qualify(server, d.Name)); !ok || s2 != server || t2 != d.Name {
			out = append(out, Rejected{Tool: d.Name, Rule: "catalog", Reason: "its qualified name would be ambiguous"})
			continue
		}
		if seen[d.Name] {
			out = append(out, Rejected{Tool: d.Name, Rule: "catalog", Reason: "duplicate: the server lists this name twice"})
			continue
		}
		seen[d.Name] = true
		var schema json.RawMessage
		if schemas != nil {
			schema = schemas[i]
		}
		if r, bad := oversized(d, l, schema); bad {
			out = append(out, r)
			continue
		}
		kept = append(kept, d)
	}
	return kept, out, nil
}

// oversized checks d's sizes; schema, when not nil, is d's input schema
// already encoded.
func oversized(d *mcp.Tool, l Limits, schema json.RawMessage) (Rejected, bool) {
	if l.DescriptionBytes > 0 {
		for _, f := range []struct{ what, v string }{{"description", d.Description}, {"title", d.Title}} {
			if len(f.v) > l.DescriptionBytes {
				return Rejected{Tool: d.Name, Rule: KeyDescriptionBytes,
					Reason: fmt.Sprintf("its %s is %d bytes, more than %s (%d)", f.what, len(f.v), KeyDescriptionBytes, l.DescriptionBytes)}, true
			}
		}
	}
	if l.SchemaBytes > 0 {
		parts := []struct {
			what string
			v    any
		}{{"input schema", d.InputSchema}, {"output schema", d.OutputSchema}, {"annotations", d.Annotations}, {"_meta", d.Meta}}
		for i, p := range parts {
			var n int
			var err error
			// CanonicalJSON says "null" for a schema it cannot encode:
			// measure that one again, so the rejection says why.
			if i == 0 && schema != nil && (d.InputSchema == nil || string(schema) != "null") {
				n = len(schema)
			} else {
				n, err = jsonSize(p.v)
			}
			if err != nil {
				return Rejected{Tool: d.Name, Rule: "catalog", Reason: fmt.Sprintf("its %s cannot be encoded as JSON", p.what)}, true
			}
			if n > l.SchemaBytes {
				return Rejected{Tool: d.Name, Rule: KeySchemaBytes,
					Reason: fmt.Sprintf("its %s is %d bytes of JSON, more than %s (%d)", p.what, n, KeySchemaBytes, l.SchemaBytes)}, true
			}
		}
	}
	return Rejected{}, false
}

func jsonSize(v any) (int, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case json.RawMessage:
		return len(x), nil
	}
	b, err := json.Marshal(v)
	return len(b), err
}
