package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/secrets"
)

// runServers implements `toolgate servers`: the configured servers, the
// servers loaded at run time (from the audit log), and, with --addr, each
// one's state in a running gateway. It shows commands and URLs (without
// their credentials), never env or header values.
func runServers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("servers", stderr)
	cfgFlag := fs.String("config", "", "config file")
	state := fs.String("state-dir", "", "state directory (for servers loaded at run time)")
	addr := fs.String("addr", "", "a running gateway's --listen address, to show each server's state")
	if err := parse(fs, args); err != nil {
		return err
	}
	path, err := config.Find(*cfgFlag)
	if err != nil {
		return err
	}
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	type row struct{ name, source, transport, target, flags string }
	rows := map[string]*row{}
	for name, s := range cfg.Servers {
		r := &row{name: name, source: "config", transport: s.Transport}
		if s.IsRemote() {
			r.target = secrets.StripURL(s.URL)
		} else {
			r.target = strings.TrimSpace(s.Command + " " + strings.Join(s.Args, " "))
		}
		var flags []string
		if s.Disabled {
			flags = append(flags, "disabled")
		}
		if s.Lazy {
			flags = append(flags, "lazy")
		}
		r.flags = strings.Join(flags, ",")
		rows[name] = r
	}
	if apath, err := auditPath(path, *state); err == nil {
		if _, statErr := os.Stat(apath); statErr == nil {
			err := audit.Read(apath, func(e *audit.Event) error {
				if e.Type == audit.ServerLoaded {
					if _, known := rows[e.Server]; !known {
						url, _ := e.Fields["url"].(string)
						rows[e.Server] = &row{name: e.Server, source: "loaded", transport: "http", target: secrets.StripURL(url)}
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	states := map[string]string{}
	if *addr != "" {
		st, _, err := fetchStatus(ctx, *addr)
		if err != nil {
			return err
		}
		for _, s := range st.Servers {
			states[s.Name] = fmt.Sprintf("%s, %d tools", s.State, s.Tools)
		}
	}
	names := make([]string, 0, len(rows))
	for n := range rows {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	header := "SERVER\tSOURCE\tTRANSPORT\tFLAGS\tTARGET"
	if *addr != "" {
		header += "\tSTATE"
	}
	fmt.Fprintln(tw, header)
	for _, n := range names {
		r := rows[n]
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s", r.name, r.source, r.transport, orDash(r.flags), firstLine(r.target, 70))
		if *addr != "" {
			line += "\t" + orDash(states[n])
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
