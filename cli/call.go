package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/extension"
)

func newCallCmd(exts []extension.Extension) *cobra.Command {
	var c common
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "call SERVER__TOOL ['{\"json\": \"arguments\"}' | -]",
		Short: "Call one tool through the filters, as the operator",
		Long: `Call one tool through the gateway's full pipeline (call filters, audit,
upstream call, response filters) and print its result. The discovery gate is
left aside: the call is the operator's, not an LLM's, and is recorded in the
audit log with session "operator". Arguments are a JSON object (default {}),
or "-" to read it from stdin. The exit status is 1 when the tool or a filter
refused or failed.`,
		Example: `  toolgate call --config config.json everything__echo '{"message": "hi"}'
  echo '{"a": 1, "b": 2}' | toolgate call --config config.json everything__get-sum - --json`,
		Args: usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw := "{}"
			if len(args) == 2 {
				raw = args[1]
				if raw == "-" {
					b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 64<<20))
					if err != nil {
						return fmt.Errorf("read arguments from stdin: %v", err)
					}
					raw = string(b)
				}
			}
			toolArgs, err := parseToolArgs(raw)
			if err != nil {
				return usageError{err}
			}
			ctx := cmd.Context()
			g, _, err := c.open(ctx, cmd.ErrOrStderr(), exts)
			if err != nil {
				return err
			}
			defer g.Close()
			name := args[0]
			if _, ok := g.Catalog().Lookup(name); !ok {
				return fmt.Errorf("no tool %q among the %d indexed (list them with toolgate tools, or find one with toolgate search)", name, g.Catalog().Len())
			}
			res := g.OperatorCall(ctx, name, toolArgs)
			out := cmd.OutOrStdout()
			if asJSON {
				if err := writeJSON(out, res); err != nil {
					return err
				}
			} else if err := printResult(out, res); err != nil {
				return err
			}
			if res.IsError {
				return fmt.Errorf("%s returned an error", name)
			}
			return nil
		},
	}
	c.register(cmd, "warn")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the whole result (content, structuredContent, isError) as JSON")
	return cmd
}

// parseToolArgs reads the arguments of `toolgate call`: a JSON object.
func parseToolArgs(raw string) (map[string]any, error) {
	t := strings.TrimSpace(raw)
	if t == "" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(strings.NewReader(t))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf(`arguments are not valid JSON (%v); give an object such as '{"path": "/tmp/a.txt"}'`, err)
	}
	if dec.More() {
		return nil, errors.New("arguments: more than one JSON value; give one object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf(`arguments must be a JSON object such as '{"path": "/tmp/a.txt"}', got %s`, strings.SplitN(t, "\n", 2)[0])
	}
	return m, nil
}

// printResult writes a tool result for a person: text blocks as they are,
// other blocks as a one-line summary, and the structured content when there
// is no text.
func printResult(w io.Writer, res *mcp.CallToolResult) error {
	var b bytes.Buffer
	text := false
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			b.WriteString(c.Text)
			text = true
		case *mcp.ImageContent:
			fmt.Fprintf(&b, "[image %s, %d bytes]", c.MIMEType, len(c.Data))
		case *mcp.AudioContent:
			fmt.Fprintf(&b, "[audio %s, %d bytes]", c.MIMEType, len(c.Data))
		case *mcp.ResourceLink:
			fmt.Fprintf(&b, "[resource link %s]", c.URI)
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				b.WriteString(c.Resource.Text)
			} else if c.Resource != nil {
				fmt.Fprintf(&b, "[resource %s, %d bytes]", c.Resource.URI, len(c.Resource.Blob))
			}
		default:
			fmt.Fprintf(&b, "[%T]", c)
		}
		if b.Len() > 0 && b.Bytes()[b.Len()-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	if !text && res.StructuredContent != nil {
		s, err := json.MarshalIndent(res.StructuredContent, "", "  ")
		if err != nil {
			return err
		}
		b.Write(s)
		b.WriteByte('\n')
	}
	_, err := w.Write(b.Bytes())
	return err
}
