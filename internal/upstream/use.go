package upstream

import (
	"context"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Use returns the server's live client session for a request the gateway
// relays as it is (passthrough mode: resources, prompts, completion,
// logging, and tools/call with the client's _meta), starting the server if
// it is down. The request counts as in flight, so the server is not stopped
// for idleness, until done is called with the request's outcome: an answer
// (a result or a JSON-RPC error) clears the failure count, and a broken
// connection marks the server down so the next request restarts it.
func (s *Server) Use(ctx context.Context) (sess *mcp.ClientSession, done func(err error), err error) {
	c, err := s.acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	return c.sess, func(err error) {
		var rpc *jsonrpc.Error
		answered := err == nil || errors.As(err, &rpc)
		if err != nil && !answered && connBroken(err) {
			s.lost(c, err)
		}
		s.release(c, true, answered)
	}, nil
}

// CallTimeout is the bound of one call to the server: its call_timeout, or
// the manager's default.
func (s *Server) CallTimeout() time.Duration { return s.callTimeout }
