// Package cli is toolgate's command line. Main runs it; a user who wants
// their own extensions in the gateway writes a three-line main that calls
// Main with them, without forking the project.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/search"
	"github.com/toolgate/toolgate/internal/secrets"
	"github.com/toolgate/toolgate/internal/state"
)

// Main runs the toolgate command line with os.Args and exits. exts are
// extra extensions served by every command that builds a gateway.
func Main(exts ...extension.Extension) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], os.Stdout, os.Stderr, exts...)
	stop()
	os.Exit(code)
}

// Run runs one command and returns the process exit code: 0 on success, 1
// when the command failed, 2 when it was called wrongly (unknown command or
// flag, a bad flag value, missing or extra arguments).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, exts ...extension.Extension) int {
	return run(ctx, args, os.Stdin, stdout, stderr, exts)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, exts []extension.Extension) int {
	// TOOLGATE_CPUPROFILE=FILE writes a CPU profile of the whole run to FILE.PID, for
	// the latency benchmarks (bench/latency).
	if p := os.Getenv("TOOLGATE_CPUPROFILE"); p != "" {
		if f, err := os.Create(fmt.Sprintf("%s.%d", p, os.Getpid())); err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	benchStats()
	setGatewayVersion()
	root := newRootCmd(exts)
	root.SetArgs(defaultToServe(args, stdin))
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetIn(stdin)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	name := strings.TrimSpace(strings.TrimPrefix(cmd.CommandPath(), "toolgate"))
	prefix := "toolgate"
	if name != "" {
		prefix += " " + name
	}
	fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return 2
	}
	return 1
}

// defaultToServe keeps the command line of earlier releases working: flags
// without a command (`toolgate --config F`) mean serve, and so does no
// argument at all when stdin is not a terminal (an MCP client started
// toolgate with no arguments). A person at a terminal gets the help.
func defaultToServe(args []string, stdin io.Reader) []string {
	if len(args) == 0 {
		if f, ok := stdin.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice == 0 {
				return []string{"serve"}
			}
		}
		return args
	}
	switch a := args[0]; {
	case a == "-h", a == "--help", a == "-v", a == "--version":
		return args
	case strings.HasPrefix(a, "-"):
		return append([]string{"serve"}, args...)
	}
	return args
}

// newRootCmd builds the command tree.
func newRootCmd(exts []extension.Extension) *cobra.Command {
	root := &cobra.Command{
		Use:   "toolgate",
		Short: "An MCP gateway with tool search, a discovery gate and filter pipelines",
		Long: `toolgate is an MCP gateway: it serves one MCP server to an LLM client and
connects it to many upstream MCP servers behind a tool search, a discovery
gate and filter pipelines.

Serve it with "toolgate serve --config FILE" (stdio), or add
"--listen 127.0.0.1:PORT" for streamable HTTP at /mcp.`,
		Version:       buildVersion().String(),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          usageArgs(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		},
	}
	root.SetVersionTemplate("toolgate {{.Version}}\n")
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(cmd *cobra.Command, args []string) error {
			c, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 {
				name := strings.Join(args, " ")
				return unknownCommand(root, name)
			}
			return c.Help()
		},
		ValidArgsFunction: func(_ *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
			var names []string
			for _, c := range root.Commands() {
				if c.IsAvailableCommand() {
					names = append(names, c.Name())
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
	})
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		newServeCmd(exts),
		newLLMProxyCmd(exts),
		newToolsCmd(exts),
		newSearchCmd(exts),
		newIndexCmd(exts),
		newCallCmd(exts),
		newScanCmd(),
		newServersCmd(),
		newStatusCmd(),
		newEventsCmd("events", ""),
		newEventsCmd("calls", "tool_call_intercepted"),
		newEventsCmd("detections", "detection"),
		newAuditCmd(),
		newPinsCmd(),
		newPolicyCmd(),
		newAuthCmd(),
		newTestServerCmd(),
		newVersionCmd(),
	)
	root.AddCommand(newModelCmd(), newConfigCmd())
	return root
}

// unknownCommand is the error for an argument where a command was
// expected, with cobra's did-you-mean suggestions.
func unknownCommand(cmd *cobra.Command, name string) error {
	cmd.SuggestionsMinimumDistance = 2
	cmd.Commands() // sorts them, so the suggestion does not depend on the order they were added
	msg := fmt.Sprintf("unknown command %q", name)
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return usageError{errors.New(msg)}
}

// groupRun is the RunE of a command that only holds subcommands (pins,
// policy, audit): without one it is a usage error naming them.
func groupRun(cmd *cobra.Command, args []string) error {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	if len(args) > 0 {
		cmd.SuggestionsMinimumDistance = 2
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			return usageError{fmt.Errorf("unknown subcommand %q; did you mean %q?", args[0], s[0])}
		}
		return usageError{fmt.Errorf("unknown subcommand %q (want %s)", args[0], strings.Join(names, ", "))}
	}
	return usageError{fmt.Errorf("want a subcommand: %s", strings.Join(names, ", "))}
}

// usageError marks an error in how a command was called (exit status 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// usageArgs makes an argument check's error a usage error.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// noArgs refuses positional arguments, naming the first one.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unexpected argument %q (%s takes none)", args[0], cmd.CommandPath())}
	}
	return nil
}

// common holds the flags every gateway-building command takes. They are
// registered on each command (not as persistent flags), so each command's
// help lists exactly what it accepts.
type common struct {
	config   string
	stateDir string
	logLevel string
	// background: serve answers clients while upstreams start.
	background bool
}

// register adds --config, --state-dir and --log-level. defaultLevel is
// info for serve and warn for the one-off commands, whose output is the
// point and whose progress is noise.
func (c *common) register(cmd *cobra.Command, defaultLevel string) {
	c.registerState(cmd, "config file (else $TOOLGATE_CONFIG, ~/.config/toolgate/config.json, ./config.json)")
	enumFlag(cmd, &c.logLevel, "log-level", defaultLevel, "log level: debug, info, warn or error; logs go to stderr", "debug", "info", "warn", "error")
}

// registerState adds --config and --state-dir only, for the commands that
// read toolgate's state without running a gateway.
func (c *common) registerState(cmd *cobra.Command, configUsage string) {
	cmd.Flags().StringVar(&c.config, "config", "", configUsage)
	cmd.Flags().StringVar(&c.stateDir, "state-dir", "", "state directory (default ~/.local/state/toolgate)")
	_ = cmd.MarkFlagFilename("config", "json")
	_ = cmd.MarkFlagDirname("state-dir")
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
	// Replicas sharing state share their embedding cache too (the gateway
	// opens its own client for the decisions).
	shared, err := state.Open(ctx, cfg.State, log.With("component", "state"))
	if err != nil {
		return nil, nil, err
	}
	idx, err := search.OpenShared(cfg.Search, stateDir, log, shared)
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
	if level == "" {
		level = "info"
	}
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
