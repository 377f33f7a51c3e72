package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

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

func newAuditCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Check the audit log",
		Args:  usageArgs(cobra.ArbitraryArgs),
		RunE:  groupRun,
	}
	var c common
	var sh sharedFlags
	verify := &cobra.Command{
		Use:   "verify",
		Short: "Check the audit log's hash chain",
		Long: `Check the audit log's hash chain. With --state redis://..., check every
replica's chain in the merged stream the replicas sharing that Redis write.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sh.url != "" {
				return runAuditVerifyShared(cmd.Context(), sh, cmd.OutOrStdout())
			}
			return runAuditVerify(&c, cmd.OutOrStdout())
		},
	}
	c.registerState(verify, "config file (for audit.path)")
	sh.register(verify)
	cmd.AddCommand(verify)
	return cmd
}

func runAuditVerify(c *common, stdout io.Writer) error {
	p, err := auditPath(c.config, c.stateDir)
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
	principal                      string
	since                          time.Duration
}

func (f eventFilter) match(e *audit.Event, now time.Time) bool {
	if f.session != "" && e.Session != f.session {
		return false
	}
	if f.principal != "" && e.Principal != f.principal {
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

// typeAliases are short names --type accepts for event types.
var typeAliases = map[string]string{"network": audit.NetworkConnection}

// actions and severities are the values --action and --severity take.
var (
	actions    = []string{"allow", "block", "alert", "error", "ok"}
	severities = []string{"low", "medium", "high", "critical"}
)

// newEventsCmd builds the events command and its narrowed forms: kind
// fixes the event type for calls and detections.
func newEventsCmd(name, kind string) *cobra.Command {
	var c common
	var sh sharedFlags
	var f eventFilter
	var asJSON bool
	short := map[string]string{
		"events":     "Read the audit log",
		"calls":      "Call decisions from the audit log",
		"detections": "Detections from the audit log",
	}[name]
	cmd := &cobra.Command{
		Use:   name,
		Short: short,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if kind != "" {
				f.typ = kind
			}
			if t, ok := typeAliases[f.typ]; ok {
				f.typ = t
			}
			if sh.url != "" {
				return runEventsShared(cmd.Context(), sh, f, asJSON, cmd.OutOrStdout())
			}
			return runEvents(&c, f, asJSON, cmd.OutOrStdout())
		},
	}
	c.registerState(cmd, "config file (for audit.path)")
	sh.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.session, "session", "", "only this session (its full id or a unique prefix)")
	fl.StringVar(&f.principal, "principal", "", "only this caller (an API key's principal, or ISSUER|SUBJECT for a token)")
	if kind == "" {
		fl.StringVar(&f.typ, "type", "", "only this event type (e.g. tool_call_intercepted; network for mcp_network_connection)")
	}
	enumFlag(cmd, &f.action, "action", "", "only this action: "+orList(actions), actions...)
	enumFlag(cmd, &f.severity, "severity", "", "only this severity or worse: "+orList(severities), severities...)
	fl.Var(newDuration(&f.since, 0), "since", "only events this recent (e.g. 30m, 1h, 7d)")
	fl.BoolVar(&asJSON, "json", false, "print JSON lines")
	return cmd
}

// runEvents lists audit events, one a line, with session ids in full so
// they can be pasted into `policy generate --session`.
func runEvents(c *common, f eventFilter, asJSON bool, stdout io.Writer) error {
	p, err := auditPath(c.config, c.stateDir)
	if err != nil {
		return err
	}
	if files, err := audit.Files(p); err != nil || len(files) == 0 {
		return fmt.Errorf("no audit log at %s (is auditing on, and is this the gateway's --state-dir?)", p)
	}
	if f.session != "" {
		if f.session, err = resolveSession(p, f.session); err != nil {
			return err
		}
	}
	pr := newEventPrinter(f, asJSON, stdout)
	if err := audit.Read(p, pr.print); err != nil {
		return err
	}
	return pr.tw.Flush()
}

// eventPrinter prints the events a filter selects, as a table or JSON.
type eventPrinter struct {
	f      eventFilter
	asJSON bool
	now    time.Time
	tw     *tabwriter.Writer
	enc    *json.Encoder
}

func newEventPrinter(f eventFilter, asJSON bool, stdout io.Writer) *eventPrinter {
	return &eventPrinter{f: f, asJSON: asJSON, now: time.Now(), tw: tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0), enc: json.NewEncoder(stdout)}
}

func (p *eventPrinter) print(e *audit.Event) error {
	if !p.f.match(e, p.now) {
		return nil
	}
	if p.asJSON {
		return p.enc.Encode(e)
	}
	who := joinNonEmpty(e.Server, e.Tool)
	if e.Type == audit.NetworkConnection {
		who = fmt.Sprintf("%s → %v:%v", e.Server, e.Fields["host"], e.Fields["port"])
	}
	tw := p.tw
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s", e.Time.Local().Format(time.DateTime), e.Type, orDash(who), orDash(e.Action), orDash(e.Reason), orDash(e.Session))
	if e.Replica != "" {
		fmt.Fprintf(tw, "\t%s", e.Replica)
	}
	if e.Principal != "" {
		fmt.Fprintf(tw, "\t%s", e.Principal)
	}
	fmt.Fprintln(tw)
	return nil
}

// resolveSession finds the one session in the audit log at path whose id
// is prefix or starts with it.
func resolveSession(path, prefix string) (string, error) {
	// A few candidates are enough to call a prefix ambiguous; the log may
	// hold millions of sessions.
	matches := map[string]bool{}
	exact := false
	err := audit.Read(path, func(e *audit.Event) error {
		switch {
		case e.Session == prefix:
			exact = true
		case e.Session != "" && strings.HasPrefix(e.Session, prefix) && len(matches) < 5:
			matches[e.Session] = true
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if exact {
		return prefix, nil
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("no session %q in %s (list sessions with `toolgate events`)", prefix, path)
	case 1:
		for s := range matches {
			return s, nil
		}
	}
	ids := make([]string, 0, len(matches))
	for s := range matches {
		ids = append(ids, s)
	}
	sort.Strings(ids)
	return "", fmt.Errorf("session prefix %q is ambiguous: it matches %s; give more of the id", prefix, strings.Join(ids, ", "))
}

func joinNonEmpty(server, tool string) string {
	if tool == "" {
		return server
	}
	return server + "__" + tool
}
