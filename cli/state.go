package cli

import (
	"context"
	"fmt"

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
