package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/gateway"
)

// DefaultStatusAddr is where `toolgate status` looks without --addr: the
// address `make run` serves on.
const DefaultStatusAddr = "127.0.0.1:8787"

func newStatusCmd() *cobra.Command {
	var addr string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Upstream states of a gateway serving HTTP (GET /status)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStatus(cmd.Context(), addr, asJSON, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&addr, "addr", DefaultStatusAddr, "the gateway's --listen address, or its base URL")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the gateway's JSON as is")
	return cmd
}

// runStatus reads GET /status from a gateway serving HTTP and prints each
// upstream's state.
func runStatus(ctx context.Context, addr string, asJSON bool, stdout io.Writer) error {
	st, body, err := fetchStatus(ctx, addr)
	if err != nil {
		return err
	}
	if asJSON {
		_, err := stdout.Write(body)
		return err
	}
	fmt.Fprintf(stdout, "toolgate %s, pid %d: %d server(s), %d tool(s)\n", st.Version, st.PID, len(st.Servers), st.Tools)
	fmt.Fprintf(stdout, "console: %s%s\n", statusBase(addr), gateway.ConsolePath)
	if st.Audit != nil {
		fmt.Fprintf(stdout, "audit chain at seq %d, hash %s\n", st.Audit.Seq, st.Audit.Hash)
	}
	fmt.Fprintln(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tSTATE\tTOOLS\tIN FLIGHT\tSTARTED\tLAST CALL\tRESTARTS\tLAST ERROR")
	for _, s := range st.Servers {
		state := string(s.State)
		if s.Starting {
			state += " (starting)"
		}
		if !s.NextAttempt.IsZero() {
			state += ", retry " + ago(st.Time, s.NextAttempt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%d\t%s\n", s.Name, state, s.Tools, s.InFlight,
			ago(st.Time, s.Started), ago(st.Time, s.LastCall), s.Restarts, firstLine(s.LastError, 70))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printEgress(stdout, st)
}

// printEgress lists the servers with an egress policy: mode, what their
// proxy relayed and refused.
func printEgress(stdout io.Writer, st *gateway.Status) error {
	var rows []gateway.ServerStatus
	for _, s := range st.Servers {
		if s.Egress != nil {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tEGRESS\tALLOW LIST\tCONNECTIONS\tREFUSED\tBYTES OUT\tBYTES IN\tLAST REFUSED\tDIRECT")
	for _, s := range rows {
		e := s.Egress
		mode := e.Mode
		if e.Configured != "" {
			mode += " (configured " + e.Configured + ", unavailable)"
		}
		last := "-"
		if e.LastRefused != "" {
			last = e.LastRefused + " " + ago(st.Time, e.LastRefusedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d\n", s.Name, mode, e.Allow, e.Connections, e.Refused, e.BytesOut, e.BytesIn, last, e.Direct)
	}
	return tw.Flush()
}

// fetchStatus reads GET /status from the gateway at addr (a --listen
// address or a base URL).
func fetchStatus(ctx context.Context, addr string) (*gateway.Status, []byte, error) {
	base := statusBase(addr)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/status", nil)
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("--addr: %v", err)}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("no gateway answered at %s (is `toolgate serve --listen` running there?): %v", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("%s/status: %s: %s", base, resp.Status, strings.TrimSpace(string(body)))
	}
	var st gateway.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, nil, fmt.Errorf("%s/status: not a toolgate status: %v", base, err)
	}
	return &st, body, nil
}

// ago renders t relative to now ("3s ago", "in 2s", "-" for never).
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		return "in " + (-d).String()
	}
	return d.String() + " ago"
}

// statusBase is the gateway's base URL from --addr (a --listen address or
// a URL, with or without /mcp).
func statusBase(addr string) string {
	base := strings.TrimSuffix(addr, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return strings.TrimSuffix(base, "/mcp")
}
