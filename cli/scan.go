package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/poison"
)

// scanInput is one line of `toolgate scan` input. For definitions either
// name/description/inputSchema or text (a description alone); for outputs,
// text.
type scanInput struct {
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Text        *string         `json:"text"`
}

// scanError is written in place of a verdict for a line that cannot be
// scanned, so that output line N still answers input line N.
type scanError struct {
	Line  int    `json:"line"`
	Error string `json:"error"`
}

func newScanCmd() *cobra.Command {
	var kind, cfgPath string
	cmd := &cobra.Command{
		Use:   "scan < lines.jsonl",
		Short: "Run the poisoning detector on JSON lines from stdin",
		Long: `Reads JSON lines from stdin and writes one verdict per line, in order:
  {"malicious": bool, "severity": "none|low|medium|high|critical", "findings": [{"category","severity","path","context","rule","detector","score","sentence"}]}
The learned classifier runs when the MiniLM model is installed (toolgate model install),
unless "classifier": "off" is in the detector config (the gateway's filters default to off);
without the model, scan says so on stderr and the verdicts are the rules' alone.
Input lines:
  --kind definition: {"name","description","inputSchema"} or {"text": "a description"}
  --kind output:     {"text": "one text block of a tool result"}
A line that cannot be read yields {"line": N, "error": "..."} in its place;
the command then exits with status 1.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runScan(cmd.Context(), kind, cfgPath, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	enumFlag(cmd, &kind, "kind", "definition", "what each line holds: definition (a tool definition or description) or output (a tool result text)", "definition", "output")
	cmd.Flags().StringVar(&cfgPath, "config", "", "a toolgate config (the detector of its filters.tool_poisoning or filters.output_poisoning is used) or a detector object alone")
	_ = cmd.MarkFlagFilename("config", "json")
	return cmd
}

// runScan scans JSON lines from stdin, one JSON verdict a line on stdout,
// in order. A line that is not a JSON object of the expected shape
// produces {"line": N, "error": "..."} in its place, scanning continues,
// and the command fails at the end naming the first bad line. Blank lines
// are skipped. When the classifier was left to "auto" and cannot run, it
// says so on stderr: verdicts of the rules alone miss much of what the
// classifier catches.
func runScan(ctx context.Context, kind, cfgPath string, stdin io.Reader, stdout, stderr io.Writer) error {
	k := poison.KindDefinition
	if kind == "output" {
		k = poison.KindOutput
	}
	key := "tool_poisoning"
	if k == poison.KindOutput {
		key = "output_poisoning"
	}
	var cfg poison.Config
	if cfgPath != "" {
		raw, err := os.ReadFile(cfgPath)
		if err != nil {
			return err
		}
		if cfg, err = poison.ConfigFromFile(raw, key); err != nil {
			return fmt.Errorf("%s: %v", cfgPath, err)
		}
	}
	if cfg.Classifier == "" {
		// Offline, the classifier's cost does not matter: scan with it
		// when the model is installed (the gateway's default is off).
		cfg.Classifier = "auto"
	}
	det, err := poison.Build(cfg)
	if err != nil {
		if cfgPath != "" {
			return fmt.Errorf("%s: filters.%s.detector: %v", cfgPath, key, err)
		}
		return err
	}
	if cfg.Classifier == "auto" && !det.Classifier() {
		_, embErr := poison.DefaultEmbedder()
		fmt.Fprintf(stderr, "toolgate scan: the learned classifier is not running, the verdicts are the rules' alone: %v\n", embErr)
	}

	in := bufio.NewReaderSize(stdin, 1<<20)
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	var firstErr error
	bad := 0
	for lineNo := 1; ; lineNo++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, rerr := in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			v, err := scanLine(det, k, line)
			if err != nil {
				bad++
				if firstErr == nil {
					firstErr = fmt.Errorf("line %d: %v", lineNo, err)
				}
				if err := enc.Encode(scanError{Line: lineNo, Error: err.Error()}); err != nil {
					return err
				}
			} else if err := enc.Encode(v); err != nil {
				return err
			}
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				break
			}
			return rerr
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if firstErr != nil {
		return fmt.Errorf("%d bad input line(s); first: %v", bad, firstErr)
	}
	return nil
}

func scanLine(det *poison.Detector, k poison.Kind, line []byte) (poison.Verdict, error) {
	var in scanInput
	if err := json.Unmarshal(line, &in); err != nil {
		return poison.Verdict{}, fmt.Errorf("not a JSON object: %v", err)
	}
	if k == poison.KindOutput {
		if in.Text == nil {
			return poison.Verdict{}, errors.New(`want {"text": "..."}`)
		}
		return det.ScanOutput(*in.Text), nil
	}
	desc := ""
	switch {
	case in.Description != nil && in.Text != nil:
		return poison.Verdict{}, errors.New(`give "description" or "text", not both`)
	case in.Description != nil:
		desc = *in.Description
	case in.Text != nil:
		desc = *in.Text
	case in.Name == "" && len(in.InputSchema) == 0:
		return poison.Verdict{}, errors.New(`want {"name","description","inputSchema"} or {"text": "..."}`)
	}
	var schema any
	if len(bytes.TrimSpace(in.InputSchema)) > 0 && string(bytes.TrimSpace(in.InputSchema)) != "null" {
		schema = in.InputSchema
	}
	return det.ScanDefinition(in.Name, desc, schema), nil
}
