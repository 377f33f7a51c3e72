// Package cli is toolgate's command line. Main runs it; a user who wants
// their own extensions in the gateway writes a three-line main that calls
// Main with them, without forking the project.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/search"
	"github.com/toolgate/toolgate/internal/secrets"
)

// Main runs the toolgate command line with os.Args and exits. exts are
// extra extensions served by every command that builds a gateway.
func Main(exts ...extension.Extension) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], os.Stdout, os.Stderr, exts...)
	stop()
	os.Exit(code)
}

// Run runs one command and returns the process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, exts ...extension.Extension) int {
	// TOOLGATE_CPUPROFILE=FILE writes a CPU profile of the whole run to FILE.PID, for
	// the latency benchmarks (bench/latency).
	if p := os.Getenv("TOOLGATE_CPUPROFILE"); p != "" {
		if f, err := os.Create(fmt.Sprintf("%s.%d", p, os.Getpid())); err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = runServe(ctx, args, stderr, exts)
	case "tools":
		err = runTools(ctx, args, stdout, stderr, exts)
	case "search":
		err = runSearch(ctx, args, stdout, stderr, exts)
	case "index":
		err = runIndex(ctx, args, stdout, stderr, exts)
	case "scan":
		err = runScan(ctx, args, os.Stdin, stdout, stderr)
	case "servers":
		err = runServers(ctx, args, stdout, stderr)
	case "pins":
		err = runPins(ctx, args, stdout, stderr)
	case "policy":
		err = runPolicy(ctx, args, stdout, stderr)
	case "audit":
		err = runAudit(ctx, args, stdout, stderr)
	case "events":
		err = runEvents(ctx, "events", "", args, stdout, stderr)
	case "calls":
		err = runEvents(ctx, "calls", "tool_call_intercepted", args, stdout, stderr)
	case "detections":
		err = runEvents(ctx, "detections", "detection", args, stdout, stderr)
	case "test-server":
		err = runTestServer(ctx, args, stdout, stderr)
	case "status":
		err = runStatus(ctx, args, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "toolgate", gateway.Version)
	case "help", "-h", "--help":
		usage(stdout)
	default:
		fmt.Fprintf(stderr, "toolgate: unknown command %q\n\n", cmd)
		usage(stderr)
		return 2
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "toolgate %s: %v\n", cmd, err)
			return 2
		}
		fmt.Fprintf(stderr, "toolgate %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprint(w, `toolgate: an MCP gateway with tool search, a discovery gate and filter pipelines.

Usage:
  toolgate [serve] --config FILE [--listen 127.0.0.1:PORT]   serve MCP over stdio (default) or HTTP at /mcp
  toolgate tools   --config FILE                              list the indexed tools
  toolgate search  --config FILE [--top-k N] "query"          run one search from the shell
  toolgate index   --config FILE                              build the search index and its cache, then exit
  toolgate scan    [--kind definition|output] [--config FILE] < lines.jsonl   run the poisoning detector
  toolgate events  [--session S] [--type T] [--since 1h] [--json]   read the audit log
  toolgate calls   [--action block]                           call decisions from the audit log
  toolgate detections [--severity high]                       detections from the audit log
  toolgate servers --config FILE [--addr 127.0.0.1:PORT]     configured and loaded servers (and their state)
  toolgate pins    list [--json] | diff|trust|reset --server S --tool T [--hash H]   manage definition pins
  toolgate policy generate --config FILE --session S --output locked.json   lock a config to what a session used
  toolgate audit verify                                       check the audit log's hash chain
  toolgate test-server [--config FILE] NAME | -- COMMAND ARGS... | --url URL   start a server, list its tools, stop it
  toolgate status  [--addr 127.0.0.1:8787] [--json]           upstream states of a gateway serving HTTP (GET /status)
  toolgate version

Common flags:
  --config FILE     config (else $TOOLGATE_CONFIG, ~/.config/toolgate/config.json, ./config.json)
  --state-dir DIR   where toolgate persists state (default ~/.local/state/toolgate)
  --log-level L     debug, info, warn or error (default info); logs go to stderr
`)
}

type usageError struct{ error }

// common holds the flags every gateway-building command takes.
type common struct {
	config   string
	stateDir string
	logLevel string
	// background: serve answers clients while upstreams start.
	background bool
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.config, "config", "", "config file")
	fs.StringVar(&c.stateDir, "state-dir", "", "state directory (default ~/.local/state/toolgate)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("toolgate "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	return nil
}

// open loads the config and builds a gateway.
func (c *common) open(ctx context.Context, stderr io.Writer, exts []extension.Extension) (*gateway.Gateway, *slog.Logger, error) {
	// The redactor wraps the log before anything is logged; it learns the
	// secret values as the config and tokens are read.
	red := secrets.NewRedactor()
	log, err := newLogger(stderr, c.logLevel, red)
	if err != nil {
		return nil, nil, usageError{err}
	}
	path, err := config.Find(c.config)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, nil, err
	}
	red.Add(secrets.ConfigValues(cfg, os.Environ())...)
	tokens, err := secrets.OpenTokens(cfg.Dir, cfg.Lookup, red)
	if err != nil {
		return nil, nil, err
	}
	log.Info("tokens file", "path", tokens.Path(), "present", tokens.Exists())
	stateDir, err := resolveStateDir(c.stateDir)
	if err != nil {
		return nil, nil, err
	}
	log.Info("starting", "config", cfg.Path, "state_dir", stateDir, "servers", len(cfg.Servers))
	idx, err := search.Open(cfg.Search, stateDir, log)
	if err != nil {
		return nil, nil, err
	}
	g, err := gateway.New(ctx, gateway.Options{Config: cfg, StateDir: stateDir, Logger: log, Extensions: exts, Index: idx, Tokens: tokens, Redactor: red, StartInBackground: c.background})
	if err != nil {
		if c, ok := idx.(io.Closer); ok {
			c.Close()
		}
		return nil, nil, err
	}
	return g, log, nil
}

func newLogger(w io.Writer, level string, red *secrets.Redactor) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(red.Handler(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))), nil
}

func resolveStateDir(flagValue string) (string, error) {
	dir := flagValue
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no --state-dir given and no home directory: %v", err)
		}
		dir = filepath.Join(home, ".local", "state", "toolgate")
	}
	if strings.HasPrefix(dir, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(home, dir[2:])
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", fmt.Errorf("state dir: %v", err)
	}
	return abs, nil
}
