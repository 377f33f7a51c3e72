package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/search"
)

// runIndex implements `toolgate index --config FILE`: connect every
// configured server, build or refresh the whole search index and its
// embedding cache in the state directory, and exit when done. It warms a
// deployment before it takes traffic: a gateway started afterwards with the
// same state directory finds every vector cached. Progress (count, rate,
// time left) goes to stderr as log lines; the summary goes to stdout. It
// fails when a configured server could not be indexed, so a deployment
// script notices.
func newIndexCmd(exts []extension.Extension) *cobra.Command {
	var c common
	cmd := &cobra.Command{
		Use:   "index",
		Short: "Build the search index and its cache, then exit",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runIndex(cmd.Context(), &c, cmd.OutOrStdout(), cmd.ErrOrStderr(), exts)
		},
	}
	// Progress (count, rate, time left) is this command's output while it
	// runs, so it logs at info like serve, not warn like the other one-off
	// commands.
	c.register(cmd, "info")
	return cmd
}

func runIndex(ctx context.Context, c *common, stdout, stderr io.Writer, exts []extension.Extension) error {
	start := time.Now()
	g, log, err := c.open(ctx, stderr, exts)
	if err != nil {
		return err
	}
	defer g.Close()
	idx := g.Catalog().Index()
	if b, ok := idx.(search.Background); ok {
		if n := b.Pending(); n > 0 {
			log.Info("embedding tools not in the cache", "tools", n, "of", g.Catalog().Len())
		}
	}
	if err := g.WaitIndexed(ctx); err != nil {
		return err
	}
	var failed []string
	servers := 0
	for _, s := range g.Upstreams().Servers() {
		if g.Catalog().HasServer(s.Name()) {
			servers++
		} else {
			failed = append(failed, s.Name())
		}
	}
	fmt.Fprintf(stdout, "indexed %d tools from %d servers in %s\n", g.Catalog().Len(), servers, time.Since(start).Round(time.Millisecond))
	if len(failed) > 0 {
		return fmt.Errorf("%d server(s) could not be indexed: %s (see the log above)", len(failed), strings.Join(failed, ", "))
	}
	return nil
}
