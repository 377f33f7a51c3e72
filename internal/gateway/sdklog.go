package gateway

import (
	"context"
	"log/slog"
)

// sdkLogger is the logger handed to the MCP SDK. The SDK reports every
// session's life ("server session connected", "session initialized", ...)
// at info, which buries the gateway's own lines for a client that
// reconnects often; those become debug. Its warnings and errors stay.
func sdkLogger(log *slog.Logger) *slog.Logger {
	return slog.New(demoteInfo{log.Handler()})
}

// demoteInfo passes records to h with info lowered to debug.
type demoteInfo struct{ h slog.Handler }

func (d demoteInfo) Enabled(ctx context.Context, l slog.Level) bool {
	if l == slog.LevelInfo {
		l = slog.LevelDebug
	}
	return d.h.Enabled(ctx, l)
}

func (d demoteInfo) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo {
		r.Level = slog.LevelDebug
	}
	return d.h.Handle(ctx, r)
}

func (d demoteInfo) WithAttrs(as []slog.Attr) slog.Handler { return demoteInfo{d.h.WithAttrs(as)} }
func (d demoteInfo) WithGroup(n string) slog.Handler       { return demoteInfo{d.h.WithGroup(n)} }
