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

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/secrets"
	"github.com/toolgate/toolgate/internal/upstream"
)

// runTestServer implements `toolgate test-server`: start one server, list
// its tools, stop it, and print the tool names or the error. The server is
// named from the config (--config FILE NAME), given as a command after
// "--", or as --url. The exit code says whether it worked.
func runTestServer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("test-server", stderr)
	var c common
	c.register(fs)
	rawURL := fs.String("url", "", "test a remote server at this URL instead")
	transport := fs.String("transport", "", `with --url: "streamable-http" (default, falling back to SSE) or "sse"`)
	timeout := fs.Duration("timeout", upstream.DefaultConnectTimeout, "how long starting and listing may take")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage:
  toolgate test-server [--config FILE] NAME       a server from the config
  toolgate test-server -- COMMAND [ARGS...]       a stdio server command
  toolgate test-server --url URL                  a remote server

Flags:
`)
		fs.PrintDefaults()
	}
	// Everything after "--" is the command, even if it looks like a flag.
	var command []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, command = args[:i], args[i+1:]
		if len(command) == 0 {
			return usageError{errors.New(`nothing after "--"; give the server's command`)}
		}
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	red := secrets.NewRedactor()
	log, err := newLogger(stderr, c.logLevel, red)
	if err != nil {
		return usageError{err}
	}

	var cfg *config.Server
	switch {
	case command != nil:
		if *rawURL != "" || fs.NArg() > 0 {
			return usageError{errors.New(`give either a server name, --url or a command after "--"`)}
		}
		wd, _ := os.Getwd()
		cfg = &config.Server{Name: filepath.Base(command[0]), Command: command[0], Args: command[1:], Transport: config.TransportStdio, Dir: wd}
	case *rawURL != "":
		if fs.NArg() > 0 {
			return usageError{errors.New("give either a server name or --url")}
		}
		if err := config.ValidateURL(*rawURL); err != nil {
			return usageError{fmt.Errorf("--url: %v", err)}
		}
		cfg = &config.Server{Name: "remote", URL: *rawURL, Transport: config.TransportStreamableHTTP}
		switch *transport {
		case "", config.TransportStreamableHTTP:
		case config.TransportSSE:
			cfg.Transport = config.TransportSSE
		default:
			return usageError{fmt.Errorf("--transport %q: want streamable-http or sse", *transport)}
		}
	default:
		if fs.NArg() != 1 {
			return usageError{errors.New(`name one server from the config, e.g. toolgate test-server --config config.json github`)}
		}
		path, err := config.Find(c.config)
		if err != nil {
			return err
		}
		conf, err := config.Load(path)
		if err != nil {
			return err
		}
		red.Add(secrets.ConfigValues(conf, os.Environ())...)
		name := fs.Arg(0)
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
