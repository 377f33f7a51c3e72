package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/secrets"
)

// notConnected is the state of a server loaded at run time by an earlier
// gateway: load_mcp_server connections live only as long as the process
// that made them, so the audit log remembers servers that are gone.
const notConnected = "not connected (loaded in an earlier run)"

// serverRow is one line of `toolgate servers` (and one object of --json).
type serverRow struct {
	Name      string   `json:"name"`
	Source    string   `json:"source"` // config or loaded
	Transport string   `json:"transport"`
	Target    string   `json:"target"`
	Flags     []string `json:"flags"`
	State     string   `json:"state,omitempty"`
	Tools     *int     `json:"tools,omitempty"`
}

func newServersCmd() *cobra.Command {
	var c common
	var addr string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "servers",
		Short: "Configured and loaded servers (and their state in a running gateway)",
		Long: `List the configured servers and the servers loaded at run time (from the
audit log). Commands and URLs are shown, never env or header values, and URLs without
their credentials.

A server loaded with load_mcp_server lives only in the gateway process that
loaded it: without --addr such servers are marked not connected; with --addr
each server's state comes from that running gateway's /status.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServers(cmd.Context(), &c, addr, asJSON, cmd.OutOrStdout())
		},
	}
	c.registerState(cmd, "config file")
	cmd.Flags().StringVar(&addr, "addr", "", "a running gateway's --listen address, to show each server's state")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func runServers(ctx context.Context, c *common, addr string, asJSON bool, stdout io.Writer) error {
	path, err := config.Find(c.config)
	if err != nil {
		return err
	}
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	// A url may hold a secret substituted from a variable.
	red := secrets.NewRedactor(secrets.ConfigValues(cfg, os.Environ())...)
	rows := map[string]*serverRow{}
	for name, s := range cfg.Servers {
		r := &serverRow{Name: name, Source: "config", Transport: s.Transport, Flags: []string{}}
		if s.IsRemote() {
			r.Target = secrets.StripURL(red.String(s.URL))
		} else {
			r.Target = strings.TrimSpace(s.Command + " " + strings.Join(s.Args, " "))
		}
		if s.Disabled {
			r.Flags = append(r.Flags, "disabled")
		}
		if s.Lazy {
			r.Flags = append(r.Flags, "lazy")
		}
		rows[name] = r
	}
	if apath, err := auditPath(path, c.stateDir); err == nil {
		if _, statErr := os.Stat(apath); statErr == nil {
			err := audit.Read(apath, func(e *audit.Event) error {
				if e.Type == audit.ServerLoaded {
					if _, known := rows[e.Server]; !known {
						url, _ := e.Fields["url"].(string)
						rows[e.Server] = &serverRow{Name: e.Server, Source: "loaded", Transport: "http", Target: secrets.StripURL(red.String(url)), Flags: []string{}, State: notConnected}
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	if addr != "" {
		st, _, err := fetchStatus(ctx, addr)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if r.Source == "config" {
				r.State = "not connected"
			}
		}
		for _, s := range st.Servers {
			r := rows[s.Name]
			if r == nil {
				r = &serverRow{Name: s.Name, Source: "loaded", Transport: "http", Flags: []string{}}
				rows[s.Name] = r
			}
			r.State = string(s.State)
			n := s.Tools
			r.Tools = &n
		}
	}
	names := make([]string, 0, len(rows))
	for n := range rows {
		names = append(names, n)
	}
	sort.Strings(names)
	if asJSON {
		out := make([]*serverRow, len(names))
		for i, n := range names {
			out[i] = rows[n]
		}
		return writeJSON(stdout, out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tSOURCE\tTRANSPORT\tFLAGS\tTARGET\tSTATE")
	for _, n := range names {
		r := rows[n]
		state := r.State
		if r.Tools != nil {
			state = fmt.Sprintf("%s, %d tools", state, *r.Tools)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Source, r.Transport, orDash(strings.Join(r.Flags, ",")), firstLine(r.Target, 70), orDash(state))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
