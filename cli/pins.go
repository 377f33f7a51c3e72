package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	pin "github.com/toolgate/toolgate/extensions/version_pinning"
	"github.com/toolgate/toolgate/internal/config"
)

// pinsFlags are the flags of the pins subcommands.
type pinsFlags struct {
	stateDir     string
	stateURL     string
	statePrefix  string
	asJSON       bool
	server, tool string
	hash         string
	binary       bool
}

func newPinsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pins",
		Short: "Manage definition pins (list, diff, trust, reset)",
		Long: `Pins live in pins.json in the state directory; a running gateway picks up
changes on its next call. Replicas with the state backend "redis" keep their
pins in Redis: give --state redis://... (and --state-prefix when the config
sets another prefix) to change them for every replica at once.`,
		Args: usageArgs(cobra.ArbitraryArgs),
		RunE: groupRun,
	}
	sub := func(name, short string, setup func(*cobra.Command, *pinsFlags)) {
		var f pinsFlags
		c := &cobra.Command{
			Use:   name,
			Short: short,
			Args:  noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return runPins(cmd.Context(), name, &f, cmd.OutOrStdout())
			},
		}
		c.Flags().StringVar(&f.stateDir, "state-dir", "", "state directory (default ~/.local/state/toolgate)")
		c.Flags().StringVar(&f.stateURL, "state", "", "the replicas' shared state: redis:// or rediss:// URL (instead of the state directory)")
		c.Flags().StringVar(&f.statePrefix, "state-prefix", config.DefaultStatePrefix, "key prefix of the shared state (the config's state.prefix)")
		setup(c, &f)
		cmd.AddCommand(c)
	}
	target := func(c *cobra.Command, f *pinsFlags) {
		c.Flags().StringVar(&f.server, "server", "", "server name (required)")
		c.Flags().StringVar(&f.tool, "tool", "", "tool name, as the server names it")
	}
	sub("list", "Every pin and its status", func(c *cobra.Command, f *pinsFlags) {
		c.Flags().BoolVar(&f.asJSON, "json", false, "print JSON")
	})
	sub("diff", "The pinned definition against the one last seen", target)
	sub("trust", "Accept the definition last seen (or exactly --hash), or a server's executable (--binary)", func(c *cobra.Command, f *pinsFlags) {
		target(c, f)
		c.Flags().BoolVar(&f.binary, "binary", false, "the server's executable (pin_binary) instead of a tool")
		c.Flags().StringVar(&f.hash, "hash", "", "pin exactly this definition hash (hex SHA-256, optionally sha256:)")
	})
	sub("reset", "Forget a pin; the next sight pins anew", func(c *cobra.Command, f *pinsFlags) {
		target(c, f)
		c.Flags().BoolVar(&f.binary, "binary", false, "the server's executable (pin_binary) instead of a tool")
	})
	return cmd
}

// runPins runs `toolgate pins list|diff|trust|reset`.
func runPins(ctx context.Context, sub string, f *pinsFlags, stdout io.Writer) error {
	if sub != "list" {
		if f.server == "" {
			return usageError{errors.New("--server is required")}
		}
		if f.binary && f.tool != "" {
			return usageError{errors.New("give --tool or --binary, not both")}
		}
		if !f.binary && f.tool == "" {
			return usageError{errors.New("--tool is required")}
		}
		if f.binary && f.hash != "" {
			return usageError{errors.New("--hash applies to tools only")}
		}
	}
	var st *pin.Store
	if f.stateURL != "" {
		b, err := openSharedState(ctx, f.stateURL, f.statePrefix)
		if err != nil {
			return err
		}
		defer b.Close()
		st = pin.NewSharedStore(b)
		defer st.Close()
	} else {
		dir, err := resolveStateDir(f.stateDir)
		if err != nil {
			return err
		}
		st = pin.NewStore(dir)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	switch sub {
	case "list":
		return pinsList(st, f.asJSON, stdout)
	case "diff":
		return pinsDiff(st, f.server, f.tool, stdout)
	case "trust":
		if f.binary {
			return pinsTrustBinary(st, f.server, stdout)
		}
		return pinsTrust(st, f.server, f.tool, f.hash, stdout)
	default:
		return pinsReset(st, f.server, f.tool, f.binary, stdout)
	}
}

// pinListing is `pins list --json`.
type pinListing struct {
	Path     string         `json:"path"`
	Tools    []toolListing  `json:"tools"`
	Binaries []binaryRecord `json:"binaries"`
}

type toolListing struct {
	Server       string     `json:"server"`
	Tool         string     `json:"tool"`
	Status       string     `json:"status"`
	Hash         string     `json:"hash,omitempty"`
	PinnedAt     *time.Time `json:"pinned_at,omitempty"`
	ObservedHash string     `json:"observed_hash,omitempty"`
	ObservedAt   *time.Time `json:"observed_at,omitempty"`
}

type binaryRecord struct {
	Server       string     `json:"server"`
	Status       string     `json:"status"`
	Command      string     `json:"command,omitempty"`
	Path         string     `json:"path,omitempty"`
	Hash         string     `json:"hash,omitempty"`
	PinnedAt     *time.Time `json:"pinned_at,omitempty"`
	ObservedPath string     `json:"observed_path,omitempty"`
	ObservedHash string     `json:"observed_hash,omitempty"`
}

func pinsList(st *pin.Store, asJSON bool, w io.Writer) error {
	f, err := st.Read()
	if err != nil {
		return err
	}
	out := pinListing{Path: st.Path(), Tools: []toolListing{}, Binaries: []binaryRecord{}}
	for _, e := range f.ToolEntries() {
		l := toolListing{Server: e.Server, Tool: e.Tool, Status: e.Status(), Hash: e.Hash, PinnedAt: e.PinnedAt}
		if e.Observed != nil {
			l.ObservedHash, l.ObservedAt = e.Observed.Hash, &e.Observed.SeenAt
		}
		out.Tools = append(out.Tools, l)
	}
	servers := make([]string, 0, len(f.Binaries))
	for s := range f.Binaries {
		servers = append(servers, s)
	}
	sort.Strings(servers)
	for _, s := range servers {
		b := f.Binaries[s]
		r := binaryRecord{Server: s, Status: b.Status(), Command: b.Command, Path: b.Path, Hash: b.Hash, PinnedAt: b.PinnedAt}
		if b.Observed != nil {
			r.ObservedPath, r.ObservedHash = b.Observed.Path, b.Observed.Hash
		}
		out.Binaries = append(out.Binaries, r)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if len(out.Tools) == 0 && len(out.Binaries) == 0 {
		fmt.Fprintf(w, "no pins in %s\n", st.Path())
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tTOOL\tSTATUS\tPINNED\tSEEN\tPINNED AT")
	for _, l := range out.Tools {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l.Server, l.Tool, l.Status, short(l.Hash), short(l.ObservedHash), when(l.PinnedAt))
	}
	for _, b := range out.Binaries {
		fmt.Fprintf(tw, "%s\t(binary %s)\t%s\t%s\t%s\t%s\n", b.Server, b.Path, b.Status, short(b.Hash), short(b.ObservedHash), when(b.PinnedAt))
	}
	return tw.Flush()
}

func short(h string) string {
	if h == "" {
		return "-"
	}
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func lookupTool(f *pin.File, server, tool string) (*pin.ToolPin, error) {
	p := f.Tool(server, tool)
	if p == nil {
		return nil, pin.MissingError(f, server, tool)
	}
	return p, nil
}

func pinsDiff(st *pin.Store, server, tool string, w io.Writer) error {
	f, err := st.Read()
	if err != nil {
		return err
	}
	p, err := lookupTool(f, server, tool)
	if err != nil {
		return err
	}
	if p.Observed == nil {
		if p.Hash == "" {
			fmt.Fprintf(w, "%s/%s: nothing pinned and nothing seen\n", server, tool)
			return nil
		}
		fmt.Fprintf(w, "%s/%s: no change; the definition last seen is the pinned one (sha256:%s)\n", server, tool, p.Hash)
		return nil
	}
	pinned := "(none)"
	if p.Hash != "" {
		pinned = "sha256:" + p.Hash
	}
	fmt.Fprintf(w, "--- pinned  %s\n+++ current sha256:%s (seen %s)\n", pinned, p.Observed.Hash, p.Observed.SeenAt.UTC().Format(time.RFC3339))
	old := pin.Indent(p.Definition)
	if p.Hash != "" && old == "" {
		old = "(definition not recorded: pinned by hash)"
	}
	_, err = io.WriteString(w, pin.Diff(old, pin.Indent(p.Observed.Definition)))
	return err
}

func pinsTrust(st *pin.Store, server, tool, hash string, w io.Writer) error {
	if hash != "" {
		h, err := pin.NormalizeHash(hash)
		if err != nil {
			return usageError{err}
		}
		hash = h
	}
	msg, err := st.Trust(server, tool, hash)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, msg)
	return nil
}

func pinsTrustBinary(st *pin.Store, server string, w io.Writer) error {
	msg, err := st.TrustBinary(server, "")
	if err != nil {
		return err
	}
	fmt.Fprintln(w, msg)
	return nil
}

func pinsReset(st *pin.Store, server, tool string, binary bool, w io.Writer) error {
	err := st.Update(func(f *pin.File) (bool, error) {
		if binary {
			if _, ok := f.Binaries[server]; !ok {
				return false, fmt.Errorf("no executable pin for server %q", server)
			}
			delete(f.Binaries, server)
			return true, nil
		}
		if _, err := lookupTool(f, server, tool); err != nil {
			return false, err
		}
		return f.DeleteTool(server, tool), nil
	})
	if err != nil {
		return err
	}
	if binary {
		fmt.Fprintf(w, "%s: executable pin removed; with auto_trust_first the next start pins it\n", server)
	} else {
		fmt.Fprintf(w, "%s/%s: pin removed; with auto_trust_first the next definition seen is pinned\n", server, tool)
	}
	return nil
}
