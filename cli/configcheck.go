package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/egress"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/secrets"
)

// errCheckFailed is returned by `config check` when it found problems; they
// have been printed already.
var errCheckFailed = errors.New("the config has errors")

// newConfigCmd is `toolgate config`, whose one subcommand, check, reads a
// config the way serve does without starting any server.
func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Inspect a config file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Shell completion belongs to the root command, not to this one when
	// it runs on its own.
	cmd.CompletionOptions.DisableDefaultCmd = true
	cmd.AddCommand(newConfigCheckCmd())
	return cmd
}

func newConfigCheckCmd() *cobra.Command {
	var (
		cfgFlag  string
		asJSON   bool
		logLevel string
	)
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Parse a config, resolve its variables and provision its filters, without starting servers",
		Long: `Check reads the config as serve would: strict decoding, $VAR resolution from the
.env beside it and the environment, and every filter provisioned (Rego policies
compiled, pin stores read) in a scratch state folder. It lists each server with
its transport and anything that would keep it from starting, and exits 1 if it
found an error. No server is started and the state folder is not touched.`,
		Example: `  toolgate config check --config ~/.config/toolgate/config.json
  toolgate config check --json`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			red := secrets.NewRedactor()
			log, err := newLogger(cmd.ErrOrStderr(), logLevel, red)
			if err != nil {
				return err
			}
			rep := checkConfig(cmd.Context(), cfgFlag, red, log)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else if err := rep.print(cmd.OutOrStdout()); err != nil {
				return err
			}
			if rep.Errors > 0 {
				return errCheckFailed
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgFlag, "config", "", "config file (else $TOOLGATE_CONFIG, ~/.config/toolgate/config.json, ./config.json)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error: what filters log while provisioning")
	return cmd
}

// Check states of servers and filters.
const (
	checkOK       = "ok"
	checkDisabled = "disabled"
	checkOff      = "off"
	checkError    = "error"
)

// checkReport is what `config check` found; --json prints it as is.
type checkReport struct {
	Config string `json:"config"`
	// Error is set when the file does not load at all.
	Error      string        `json:"error,omitempty"`
	ServersKey string        `json:"servers_key,omitempty"`
	Ignored    []string      `json:"ignored,omitempty"`
	Servers    []checkServer `json:"servers"`
	Filters    []checkFilter `json:"filters"`
	Errors     int           `json:"errors"`
}

type checkServer struct {
	Name      string `json:"name"`
	Transport string `json:"transport"`
	Target    string `json:"target"`
	Lazy      bool   `json:"lazy,omitempty"`
	// State is ok, disabled (by the file) or error (it would not start).
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// Egress is a stdio server's egress mode when it is not off.
	Egress string `json:"egress,omitempty"`
}

type checkFilter struct {
	Key string `json:"key"`
	ID  string `json:"id,omitempty"`
	// Default is set for a protection that runs because the config does
	// not turn it off (gateway.DefaultOn).
	Default bool `json:"default,omitempty"`
	// State is ok, off ("key": false) or error.
	State string `json:"state"`
	Error string `json:"error,omitempty"`
}

// checkConfig loads the config at flag (or where config.Find looks) and
// checks every server and filter, collecting every problem rather than
// stopping at the first.
func checkConfig(ctx context.Context, flag string, red *secrets.Redactor, log *slog.Logger) *checkReport {
	rep := &checkReport{Servers: []checkServer{}, Filters: []checkFilter{}}
	path, err := config.Find(flag)
	if err != nil {
		rep.Error, rep.Errors = err.Error(), 1
		return rep
	}
	rep.Config = path
	cfg, err := config.Load(path)
	if err != nil {
		rep.Error, rep.Errors = err.Error(), 1
		return rep
	}
	red.Add(secrets.ConfigValues(cfg, os.Environ())...)
	rep.Config, rep.ServersKey, rep.Ignored = cfg.Path, cfg.ServersKey, cfg.Ignored
	for _, name := range sortedKeys(cfg.Servers) {
		s := cfg.Servers[name]
		cs := checkServer{Name: name, Transport: s.Transport, Lazy: s.Lazy, State: checkOK}
		if s.IsRemote() {
			cs.Target = red.String(s.URL)
		} else {
			cs.Target = red.String(strings.TrimSpace(s.Command + " " + strings.Join(s.Args, " ")))
		}
		switch {
		case s.DisabledReason != "":
			cs.State, cs.Reason = checkError, s.DisabledReason
		case s.Disabled:
			cs.State, cs.Reason = checkDisabled, "disabled in the config"
		case !s.IsRemote():
			if err := checkCommand(s); err != nil {
				cs.State, cs.Reason = checkError, err.Error()
			} else if err := checkEgress(s); err != nil {
				cs.State, cs.Reason = checkError, err.Error()
			}
		}
		if s.EgressOn() {
			cs.Egress = s.Egress.Mode
		}
		if cs.State == checkError {
			rep.Errors++
		}
		rep.Servers = append(rep.Servers, cs)
	}
	rep.Filters = checkFilters(ctx, cfg, log)
	for _, f := range rep.Filters {
		if f.State == checkError {
			rep.Errors++
		}
	}
	return rep
}

// checkCommand reports what would keep a stdio server from starting before
// it runs: a working directory or command that is not there. Extensions
// that pin executables may still launch another file; that is checked at
// start.
func checkCommand(s *config.Server) error {
	if st, err := os.Stat(s.Dir); err != nil || !st.IsDir() {
		return fmt.Errorf("cwd %s is not a folder", s.Dir)
	}
	cmd := s.Command
	if strings.ContainsRune(cmd, filepath.Separator) || strings.ContainsRune(cmd, '/') {
		if !filepath.IsAbs(cmd) {
			cmd = filepath.Join(s.Dir, cmd)
		}
		if _, err := exec.LookPath(cmd); err != nil {
			return fmt.Errorf("command %s: %v", s.Command, errors.Unwrap(err))
		}
		return nil
	}
	if _, err := exec.LookPath(cmd); err != nil {
		return fmt.Errorf("command %q is not on PATH", s.Command)
	}
	return nil
}

// checkEgress reports an enforced server that could not start because
// the kernel refuses network namespaces (and the config allows no fallback).
func checkEgress(s *config.Server) error {
	if !s.EgressOn() || s.Egress.Mode != egress.ModeEnforce || s.Egress.Fallback == egress.ModeMonitor {
		return nil
	}
	return egress.Probe()
}

// checkFilters provisions and validates, one at a time, the extension of
// every filters key and of every default protection, as the gateway would,
// in a scratch state folder that is removed afterwards.
func checkFilters(ctx context.Context, cfg *config.Config, log *slog.Logger) []checkFilter {
	out := []checkFilter{}
	state, err := os.MkdirTemp("", "toolgate-check-")
	if err != nil {
		return append(out, checkFilter{Key: "filters", State: checkError, Error: fmt.Sprintf("scratch state folder: %v", err)})
	}
	defer os.RemoveAll(state)
	type item struct {
		key     string
		raw     json.RawMessage
		builtIn bool
	}
	var items []item
	for _, k := range cfg.Filters.Order {
		items = append(items, item{k, cfg.Filters.Extensions[k], false})
	}
	for _, k := range gateway.DefaultOn {
		if _, set := cfg.Filters.Extensions[k]; !set {
			if _, registered := extension.Lookup(k); registered {
				items = append(items, item{k, json.RawMessage("{}"), true})
			}
		}
	}
	for _, it := range items {
		cf := checkFilter{Key: it.key, Default: it.builtIn, State: checkOK}
		if err := checkOneFilter(ctx, cfg, it.key, it.raw, state, log, &cf); err != nil {
			cf.State, cf.Error = checkError, err.Error()
		}
		out = append(out, cf)
	}
	return out
}

func checkOneFilter(ctx context.Context, cfg *config.Config, key string, raw json.RawMessage, state string, log *slog.Logger, cf *checkFilter) (err error) {
	f, ok := extension.Lookup(key)
	if !ok {
		hint := ""
		if s := config.Suggest(key, append(extension.Keys(), "similarity_threshold", "egress")); s != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", s)
		}
		return fmt.Errorf("unknown filter key %q%s; known: similarity_threshold, egress, %s", key, hint, strings.Join(extension.Keys(), ", "))
	}
	if string(bytes.TrimSpace(raw)) == "false" {
		cf.State = checkOff
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	e, err := f(raw)
	if err != nil {
		return err
	}
	cf.ID = e.ID()
	h := extension.Host{
		Logger:    log.With("extension", extension.Name(e.ID())),
		ConfigDir: cfg.Dir,
		StateDir:  state,
		Tools:     func() []extension.ToolRef { return nil },
		Emit:      func(context.Context, extension.Event) {},
	}
	closeExt := func() {
		if c, ok := e.(extension.Closer); ok {
			c.Close()
		}
	}
	if p, ok := e.(extension.Provisioner); ok {
		if err := p.Provision(ctx, h); err != nil {
			closeExt()
			return fmt.Errorf("provision: %w", err)
		}
	}
	defer closeExt()
	if v, ok := e.(extension.Validator); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("validate: %w", err)
		}
	}
	return nil
}

func (r *checkReport) print(w io.Writer) error {
	if r.Error != "" {
		fmt.Fprintf(w, "%s\n\n1 error\n", r.Error)
		return nil
	}
	fmt.Fprintf(w, "config %s\n", r.Config)
	if r.ServersKey != "" && r.ServersKey != "mcpServers" {
		fmt.Fprintf(w, "servers read from %q (VS Code's form)\n", r.ServersKey)
	}
	if len(r.Ignored) > 0 {
		fmt.Fprintf(w, "ignored settings of other MCP clients: %s\n", strings.Join(r.Ignored, ", "))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tTRANSPORT\tSTATE\tTARGET")
	for _, s := range r.Servers {
		state := s.State
		if s.Lazy {
			state += ", lazy"
		}
		if s.Egress != "" {
			state += ", egress " + s.Egress
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, s.Transport, state, firstLine(s.Target, 60))
	}
	if len(r.Servers) == 0 {
		fmt.Fprintln(tw, "(none)\t\t\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FILTER\tEXTENSION\tSTATE")
	for _, f := range r.Filters {
		state := f.State
		if f.Default {
			state += " (default)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Key, orDash(f.ID), state)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var problems []string
	for _, s := range r.Servers {
		if s.State != checkOK {
			problems = append(problems, fmt.Sprintf("%s server %s: %s", s.State, s.Name, s.Reason))
		}
	}
	for _, f := range r.Filters {
		if f.State == checkError {
			problems = append(problems, fmt.Sprintf("error filter %s: %s", f.Key, f.Error))
		}
	}
	if len(problems) > 0 {
		fmt.Fprintln(w)
		for _, p := range problems {
			fmt.Fprintln(w, p)
		}
	}
	switch r.Errors {
	case 0:
		fmt.Fprintln(w, "\nno errors")
	case 1:
		fmt.Fprintln(w, "\n1 error")
	default:
		fmt.Fprintf(w, "\n%d errors\n", r.Errors)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
