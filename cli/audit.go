package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/config"
)

// auditPath finds the audit log: the config's audit.path if a config is
// given or found, else audit.jsonl in the state directory.
func auditPath(configFlag, stateFlag string) (string, error) {
	if configFlag != "" {
		cfg, err := config.Load(configFlag)
		if err != nil {
			return "", err
		}
		if cfg.Audit.Path != "" {
			return cfg.Audit.Path, nil
		}
	}
	dir, err := resolveStateDir(stateFlag)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "audit.jsonl"), nil
}

func runAudit(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "verify" {
		return usageError{errors.New("usage: toolgate audit verify [--state-dir DIR] [--config FILE]")}
	}
	fs := newFlagSet("audit verify", stderr)
	cfgFlag := fs.String("config", "", "config file (for audit.path)")
	state := fs.String("state-dir", "", "state directory")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	p, err := auditPath(*cfgFlag, *state)
	if err != nil {
		return err
	}
	rep, err := audit.Verify(p)
	if err != nil {
		var be *audit.BrokenError
		if errors.As(err, &be) {
			fmt.Fprintf(stdout, "%s: %d records verified, then: %v\n", p, rep.Records, be)
			return errors.New("audit chain is broken")
		}
		return err
	}
	fmt.Fprintf(stdout, "%s: %d records (seq %d to %d) in %d file(s), chain intact up to the checkpoint (seq %d)\n",
		p, rep.Records, rep.First, rep.Last, rep.Files, rep.Checkpoint)
	if rep.PastCheckpoint > 0 {
		fmt.Fprintf(stdout, "note: the last record (seq %d) is past the checkpoint: written just before the gateway stopped, or appended by something else\n", rep.Last)
	}
	return nil
}

// eventFilter selects events for the events, calls and detections commands.
type eventFilter struct {
	session, typ, action, severity string
	since                          time.Duration
}

func (f eventFilter) match(e *audit.Event, now time.Time) bool {
	if f.session != "" && e.Session != f.session {
		return false
	}
	if f.typ != "" && e.Type != f.typ {
		return false
	}
	if f.action != "" && e.Action != f.action {
		return false
	}
	if f.severity != "" {
		s, _ := e.Fields["severity"].(string)
		if !severityAtLeast(s, f.severity) {
			return false
		}
	}
	if f.since > 0 && now.Sub(e.Time) > f.since {
		return false
	}
	return true
}

var severityRank = map[string]int{"low": 1, "medium": 2, "high": 3, "critical": 4}

func severityAtLeast(s, min string) bool {
	return severityRank[s] >= severityRank[min] && severityRank[s] > 0
}

// runEvents lists audit events. kind fixes the type for the calls and
// detections commands.
func runEvents(_ context.Context, name, kind string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(name, stderr)
	cfgFlag := fs.String("config", "", "config file (for audit.path)")
	state := fs.String("state-dir", "", "state directory")
	var f eventFilter
	fs.StringVar(&f.session, "session", "", "only this session")
	if kind == "" {
		fs.StringVar(&f.typ, "type", "", "only this event type (e.g. tool_call_intercepted)")
	}
	fs.StringVar(&f.action, "action", "", "only this action (allow, block, alert)")
	fs.StringVar(&f.severity, "severity", "", "only this severity or worse (low, medium, high, critical)")
	fs.DurationVar(&f.since, "since", 0, "only events this recent (e.g. 1h)")
	asJSON := fs.Bool("json", false, "print JSON lines")
	if err := parse(fs, args); err != nil {
		return err
	}
	if kind != "" {
		f.typ = kind
	}
	p, err := auditPath(*cfgFlag, *state)
	if err != nil {
		return err
	}
	if files, err := audit.Files(p); err != nil || len(files) == 0 {
		return fmt.Errorf("no audit log at %s (is auditing on, and is this the gateway's --state-dir?)", p)
	}
	now := time.Now()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	enc := json.NewEncoder(stdout)
	err = audit.Read(p, func(e *audit.Event) error {
		if !f.match(e, now) {
			return nil
		}
		if *asJSON {
			return enc.Encode(e)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.Local().Format(time.DateTime), e.Type, joinNonEmpty(e.Server, e.Tool), e.Action, e.Reason, shortSession(e.Session))
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Flush()
}

func joinNonEmpty(server, tool string) string {
	if tool == "" {
		return server
	}
	return server + "__" + tool
}

func shortSession(s string) string {
	if len(s) > 16 {
		return s[:16] + "…"
	}
	return s
}
