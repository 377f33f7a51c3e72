package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/secrets"
	"github.com/toolgate/toolgate/internal/upstream"
)

// testServerFlags are the flags of test-server.
type testServerFlags struct {
	common
	url, transport string
	timeout        time.Duration
	asJSON         bool
}

func newTestServerCmd() *cobra.Command {
	var f testServerFlags
	cmd := &cobra.Command{
		Use:   "test-server [--config FILE] NAME | -- COMMAND [ARGS...] | --url URL",
		Short: "Start one server, list its tools, stop it",
		Long: `Start one server, list its tools, stop it, and print the tool names or the
error. The server is named from the config (NAME), given as a command after
"--" (everything after it is the command, even if it looks like a flag), or
as --url. The exit status says whether it worked.`,
		Example: `  toolgate test-server --config config.json github
  toolgate test-server -- npx -y @modelcontextprotocol/server-everything
  toolgate test-server --url http://127.0.0.1:3001/mcp`,
		Args: func(cmd *cobra.Command, args []string) error {
			var name, command []string
			if i := cmd.ArgsLenAtDash(); i >= 0 {
				name, command = args[:i], args[i:]
				if len(command) == 0 {
					return usageError{errors.New(`nothing after "--"; give the server's command`)}
				}
			} else {
				name = args
			}
			switch {
			case command != nil && (len(name) > 0 || f.url != ""):
				return usageError{errors.New(`give either a server name, --url or a command after "--"`)}
			case f.url != "" && len(name) > 0:
				return usageError{errors.New("give either a server name or --url")}
			case command == nil && f.url == "" && len(name) != 1:
				if len(name) > 1 {
					return usageError{fmt.Errorf("unexpected argument %q: name one server", name[1])}
				}
				return usageError{errors.New(`name one server from the config, e.g. toolgate test-server --config config.json github`)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var name string
			var command []string
			if i := cmd.ArgsLenAtDash(); i >= 0 {
				command = args[i:]
			} else if len(args) == 1 {
				name = args[0]
			}
			return runTestServer(cmd.Context(), &f, name, command, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.register(cmd, "warn")
	fl := cmd.Flags()
	fl.StringVar(&f.url, "url", "", "test a remote server at this URL instead")
	enumFlag(cmd, &f.transport, "transport", "", `with --url: "streamable-http" (default, falling back to SSE) or "sse"`, config.TransportStreamableHTTP, config.TransportSSE)
	fl.Var(newDuration(&f.timeout, upstream.DefaultConnectTimeout), "timeout", "how long starting and listing may take")
	fl.BoolVar(&f.asJSON, "json", false, "print the result as JSON")
	return cmd
}

// runTestServer starts the server (a config entry by name, a command, or
// --url), lists its tools and stops it.
func runTestServer(ctx context.Context, f *testServerFlags, name string, command []string, stdout, stderr io.Writer) error {
	c, rawURL, transport, timeout, asJSON := &f.common, &f.url, &f.transport, &f.timeout, &f.asJSON
	red := secrets.NewRedactor()
	log, err := newLogger(stderr, c.logLevel, red)
	if err != nil {
		return usageError{err}
	}

	var cfg *config.Server
	switch {
	case command != nil:
		wd, _ := os.Getwd()
		cfg = &config.Server{Name: filepath.Base(command[0]), Command: command[0], Args: command[1:], Transport: config.TransportStdio, Dir: wd}
	case *rawURL != "":
		if err := config.ValidateURL(*rawURL); err != nil {
			return usageError{fmt.Errorf("--url: %v", err)}
		}
		cfg = &config.Server{Name: "remote", URL: *rawURL, Transport: config.TransportStreamableHTTP}
		if *transport == config.TransportSSE {
			cfg.Transport = config.TransportSSE
		}
	default:
		path, err := config.Find(c.config)
		if err != nil {
			return err
		}
		conf, err := config.Load(path)
		if err != nil {
			return err
		}
		red.Add(secrets.ConfigValues(conf, os.Environ())...)
		s, ok := conf.Servers[name]
		if !ok {
			names := make([]string, 0, len(conf.Servers))
			for n := range conf.Servers {
				names = append(names, n)
			}
			slices.Sort(names)
			return fmt.Errorf("%s has no server %q (it has: %s)", conf.Path, name, strings.Join(names, ", "))
		}
		if s.DisabledReason != "" {
			return fmt.Errorf("%s: server %q is disabled: %s", conf.Path, name, s.DisabledReason)
		}
		cfg = s
	}
	if cfg.Name == "" || config.ValidateServerName(cfg.Name) != nil {
		cfg.Name = "server"
	}

	m := upstream.NewManager(upstream.Options{Logger: log, ConnectTimeout: *timeout})
	defer m.Close()
	srv, err := m.Add(cfg)
	if err != nil {
		return err
	}
	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	tools, lerr := srv.ListTools(lctx)
	elapsed := time.Since(start)
	srv.Stop()

	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	if *asJSON {
		out := map[string]any{"server": cfg.Name, "ok": lerr == nil, "tools": names, "duration_ms": elapsed.Milliseconds()}
		if lerr != nil {
			out["error"] = red.String(lerr.Error())
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
		if lerr != nil {
			return errors.New("the server did not work")
		}
		return nil
	}
	if lerr != nil {
		return fmt.Errorf("%s did not work: %s", cfg.Name, red.String(lerr.Error()))
	}
	fmt.Fprintf(stdout, "%s: ok, %d tool(s) in %s\n", cfg.Name, len(names), elapsed.Round(time.Millisecond))
	for _, n := range names {
		fmt.Fprintf(stdout, "  %s\n", n)
	}
	return nil
}
