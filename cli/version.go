package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"sync"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/upstream"
)

// Set at link time by release builds (make release), overriding what the
// Go build info says:
//
//	-ldflags "-X github.com/toolgate/toolgate/cli.version=v1.2.3 -X github.com/toolgate/toolgate/cli.commit=abc -X github.com/toolgate/toolgate/cli.date=2026-01-02T03:04:05Z"
var (
	version string
	commit  string
	date    string
)

// versionInfo is what `toolgate version` prints.
type versionInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Date     string `json:"date"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

func (v versionInfo) String() string {
	s := fmt.Sprintf("%s (commit %s", v.Version, v.Commit)
	if v.Modified {
		s += ", modified"
	}
	return s + fmt.Sprintf(", built %s, %s)", v.Date, v.Go)
}

// buildVersion reads the module version and the VCS stamp Go writes into
// every binary built from a checkout (vcs.revision, vcs.time), then applies
// the -X overrides. `go install ...@v1.2.3` fills the module version; a
// checkout build says (devel).
func buildVersion() versionInfo {
	v := versionInfo{Version: "(devel)", Commit: "unknown", Date: "unknown", Go: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.Go = bi.GoVersion
		if bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.time":
				v.Date = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if version != "" {
		v.Version = version
	}
	if commit != "" {
		v.Commit, v.Modified = commit, false
	}
	if date != "" {
		v.Date = date
	}
	return v
}

var setVersionOnce sync.Once

// setGatewayVersion makes the gateway report the binary's version to MCP
// clients and upstream servers, unless the embedding program already set
// one.
func setGatewayVersion() {
	setVersionOnce.Do(func() {
		v := buildVersion().Version
		if gateway.Version == "dev" {
			gateway.Version = v
		}
		if upstream.Version == "dev" {
			upstream.Version = v
		}
	})
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := buildVersion()
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), v)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "toolgate %s\n", v)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
