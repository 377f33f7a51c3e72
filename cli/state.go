package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/state"
)

// openSharedState connects to the replicas' Redis named by a --state flag,
// under prefix (the config's state.prefix).
func openSharedState(ctx context.Context, rawURL, prefix string) (*state.Backend, error) {
	if err := config.CheckRedisURL(rawURL); err != nil {
		return nil, usageError{fmt.Errorf("--state: %v", err)}
	}
	return state.Open(ctx, config.State{Backend: config.StateRedis, URL: rawURL, Prefix: prefix, Replica: "cli"}, nil)
}

// sharedFlags are --state and --state-prefix of the commands that read or
// change the replicas' shared state.
type sharedFlags struct{ url, prefix string }

func (s *sharedFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.url, "state", "", "the replicas' shared state: redis:// or rediss:// URL (reads the merged view of every replica)")
	cmd.Flags().StringVar(&s.prefix, "state-prefix", config.DefaultStatePrefix, "key prefix of the shared state (the config's state.prefix)")
}

// runEventsShared prints the merged audit stream of the replicas, oldest
// first, checking each record's hash on the way.
func runEventsShared(ctx context.Context, sh sharedFlags, f eventFilter, asJSON bool, stdout io.Writer) error {
	b, err := openSharedState(ctx, sh.url, sh.prefix)
	if err != nil {
		return err
	}
	defer b.Close()
	pr := newEventPrinter(f, asJSON, stdout)
	n := 0
	err = state.ReadAuditStream(ctx, b, func(replica string, line []byte) error {
		e, err := audit.ParseRecord(line)
		if err != nil {
			return fmt.Errorf("audit stream %s: a record of replica %q: %v", b.AuditStreamKey(), replica, err)
		}
		n++
		return pr.print(e)
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("no audit records in %s (is the prefix the config's state.prefix?)", b.AuditStreamKey())
	}
	return pr.tw.Flush()
}

// runAuditVerifyShared checks every replica's chain in the merged stream.
func runAuditVerifyShared(ctx context.Context, sh sharedFlags, stdout io.Writer) error {
	b, err := openSharedState(ctx, sh.url, sh.prefix)
	if err != nil {
		return err
	}
	defer b.Close()
	var chains audit.Chains
	first := map[string]uint64{}
	counts := map[string]int{}
	var broken error
	err = state.ReadAuditStream(ctx, b, func(replica string, line []byte) error {
		e, err := chains.Add(replica, line)
		if err != nil {
			broken = fmt.Errorf("replica %q, record %d of it in the stream: %v", replica, counts[replica]+1, err)
			return errStop
		}
		if counts[replica] == 0 {
			first[replica] = e.Seq
		}
		counts[replica]++
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	heads := chains.Heads()
	names := make([]string, 0, len(heads))
	for r := range heads {
		names = append(names, r)
	}
	sort.Strings(names)
	for _, r := range names {
		fmt.Fprintf(stdout, "replica %s: %d records (seq %d to %d), chain intact\n", orDash(r), counts[r], first[r], heads[r].Seq)
	}
	if broken != nil {
		fmt.Fprintf(stdout, "%s: %v\n", b.AuditStreamKey(), broken)
		return errors.New("audit chain is broken")
	}
	if len(names) == 0 {
		return fmt.Errorf("no audit records in %s (is the prefix the config's state.prefix?)", b.AuditStreamKey())
	}
	return nil
}

var errStop = errors.New("stop")
