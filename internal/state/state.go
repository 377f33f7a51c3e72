// Package state is the connection to the shared state of gateway replicas.
// Decisions that span calls (rate limits, cross-server flow windows,
// discovery records, the stateless token key) live either in the process
// (backend "memory", the default: no *Backend at all) or in Redis (backend
// "redis"), where every replica of one gateway sees the same state. Each
// package that owns such state defines its own small store interface with
// an in-memory and a Redis implementation; this package only opens the
// client, names the keys and says what a failure means.
//
// A Redis that cannot be reached is reported as *UnavailableError: the
// callers fail closed (a call needing a limit or flow decision is refused)
// and the client reconnects by itself, so traffic recovers without a
// restart when Redis is back.
package state

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/config"
)

// Timeouts of one Redis round trip. A decision waits at most this long
// before failing closed; they are short because Redis answers in well
// under a millisecond on a healthy network.
const (
	dialTimeout = 1 * time.Second
	ioTimeout   = 500 * time.Millisecond
)

// Backend is an open Redis backend.
type Backend struct {
	Client  *redis.Client
	prefix  string
	replica string
	where   string // host:port, for errors and logs (never the password)
	log     *slog.Logger
}

// Open connects to the backend of cfg; it returns nil, nil for "memory".
// The first PING must succeed, so a replica never starts on a Redis it
// cannot reach (a later outage is survived, see UnavailableError).
func Open(ctx context.Context, cfg config.State, log *slog.Logger) (*Backend, error) {
	if !cfg.Shared() {
		return nil, nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts, err := redis.ParseURL(cfg.URL)
	if err != nil {
		u, _ := url.Parse(cfg.URL)
		where := "state.url"
		if u != nil {
			where = u.Redacted()
		}
		return nil, fmt.Errorf("state: %s: %v", where, err)
	}
	if opts.TLSConfig != nil && opts.TLSConfig.MinVersion < tls.VersionTLS12 {
		opts.TLSConfig.MinVersion = tls.VersionTLS12
	}
	if cfg.CAFile != "" && opts.TLSConfig != nil {
		pemData, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("state.ca_file: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemData) {
			return nil, fmt.Errorf("state.ca_file %s: no PEM certificate in it", cfg.CAFile)
		}
		opts.TLSConfig.RootCAs = pool
	}
	if opts.DialTimeout == 5*time.Second { // go-redis' default: not set in the URL
		opts.DialTimeout = dialTimeout
	}
	if opts.ReadTimeout == 3*time.Second {
		opts.ReadTimeout, opts.WriteTimeout = ioTimeout, ioTimeout
	}
	// A failed round trip is reported, not retried: a retry would double
	// the wait before failing closed, and the next call tries again.
	opts.MaxRetries = -1
	opts.ClientName = "toolgate-" + cfg.Replica
	b := &Backend{Client: redis.NewClient(opts), prefix: cfg.Prefix, replica: cfg.Replica, where: opts.Addr, log: log}
	if err := b.Client.Ping(ctx).Err(); err != nil {
		b.Client.Close()
		return nil, fmt.Errorf("state: redis at %s: %v", b.where, err)
	}
	return b, nil
}

// NewForTest wraps a client (tests and benchmarks).
func NewForTest(c *redis.Client, prefix, replica string) *Backend {
	return &Backend{Client: c, prefix: prefix, replica: replica, where: c.Options().Addr, log: slog.New(slog.DiscardHandler)}
}

// Key joins the prefix and parts with ':'.
func (b *Backend) Key(parts ...string) string {
	n := len(b.prefix)
	for _, p := range parts {
		n += len(p) + 1
	}
	k := make([]byte, 0, n)
	k = append(k, b.prefix...)
	for i, p := range parts {
		if i > 0 {
			k = append(k, ':')
		}
		k = append(k, p...)
	}
	return string(k)
}

// Replica is this process's name in shared records.
func (b *Backend) Replica() string { return b.replica }

// Close closes the client.
func (b *Backend) Close() error { return b.Client.Close() }

// Err turns a Redis error into an *UnavailableError (redis.Nil and nil
// pass through), so callers can tell an outage from a decision.
func (b *Backend) Err(err error) error {
	if err == nil || errors.Is(err, redis.Nil) {
		return err
	}
	var ue *UnavailableError
	if errors.As(err, &ue) {
		return err
	}
	return &UnavailableError{Where: b.where, Err: err}
}

// UnavailableError is a Redis round trip that failed: the shared state
// could not be read or written, so no decision was made.
type UnavailableError struct {
	Where string // host:port
	Err   error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("shared state (redis at %s) is unavailable: %v", e.Where, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// IsUnavailable reports whether err is, or wraps, an *UnavailableError.
func IsUnavailable(err error) bool {
	var ue *UnavailableError
	return errors.As(err, &ue)
}

type ctxKey struct{}

// WithBackend returns ctx carrying b, for extensions' Provision: the
// gateway provisions them with it, and an extension that keeps state
// across calls asks From for its store. Carried by the context rather than
// a field of extension.Host so that the public API does not name an
// internal type.
func WithBackend(ctx context.Context, b *Backend) context.Context {
	if b == nil {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, b)
}

// From returns the backend ctx carries, or nil (memory).
func From(ctx context.Context) *Backend {
	b, _ := ctx.Value(ctxKey{}).(*Backend)
	return b
}
