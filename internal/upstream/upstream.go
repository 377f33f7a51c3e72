// Package upstream manages the gateway's connections to MCP servers: stdio
// child processes (each in its own process group, so stopping one ends its
// whole tree) and remote servers over streamable HTTP or legacy SSE.
//
// A server is started on first use (two callers that find it stopped start
// it once), stopped after idle_timeout without a call (never while a call is
// in flight), marked failed when it exits or its connection breaks, and
// started again by the next call, with a growing delay while it keeps
// failing. Each call has a deadline; when it passes, or the caller gives up,
// the SDK client sends notifications/cancelled upstream.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/egress"
	"github.com/toolgate/toolgate/internal/netguard"
)

// Defaults for connection handling.
const (
	DefaultConnectTimeout = 30 * time.Second
	DefaultCallTimeout    = config.DefaultCallTimeout
	// stopGrace is how long a child gets after its stdin closes, and again
	// after SIGTERM, before its process group is killed.
	stopGrace = 2 * time.Second
	// Backoff after consecutive failures: none after the first (a crash
	// is retried by the next call at once), then BackoffMin doubling up to
	// BackoffMax.
	BackoffMin = 500 * time.Millisecond
	BackoffMax = 30 * time.Second
)

// Version is what the gateway reports as its client implementation.
var Version = "dev"

// State of an upstream, as reported by Status.
type State string

const (
	// StateRunning: connected, with at least one call in flight.
	StateRunning State = "running"
	// StateIdle: connected, no call in flight; stopped once idle for
	// idle_timeout.
	StateIdle State = "idle"
	// StateStopped: not connected, and nothing went wrong: never started
	// (lazy), stopped after its idle timeout, or stopped by the gateway.
	// The next call starts it.
	StateStopped State = "stopped"
	// StateFailed: not connected because its last start failed or it
	// exited / dropped the connection unexpectedly. The next call starts
	// it again, once any backoff has passed.
	StateFailed State = "failed"
)

// ErrClosed is returned for calls to a server that was removed or whose
// manager is closed.
var ErrClosed = errors.New("the server was removed or the gateway is shutting down")

// Options configure a Manager.
type Options struct {
	Logger *slog.Logger
	// OnToolsChanged is called (on its own goroutine) when a server sends
	// notifications/tools/list_changed.
	OnToolsChanged func(server string)
	// OnStarted is called (on its own goroutine) after every successful
	// start of a server, with the number of starts so far (1 for the first).
	OnStarted func(server string, starts int)
	// ConnectTimeout bounds starting a server and its handshake.
	ConnectTimeout time.Duration
	// ProtocolVersion is the protocol revision offered to servers
	// (default ProtocolVersion).
	ProtocolVersion string
	// CallTimeout bounds one tool call of a server whose config sets no
	// call_timeout.
	CallTimeout time.Duration
	// HTTPClient is the base client for remote servers (default: a client
	// with sane timeouts on the transport).
	HTTPClient *http.Client
	// ClientOptions, if set, gives the client options (handlers for
	// server-to-client requests and notifications) for a server's
	// session; the manager chains its own tools/list_changed handling onto
	// them.
	ClientOptions func(server string) mcp.ClientOptions
	// ClientMiddleware, if set, gives receiving middleware for a server's
	// client, for server-to-client requests ClientOptions has no handler
	// for (roots/list) or that the SDK client would check first
	// (elicitation/create).
	ClientMiddleware func(server string) []mcp.Middleware
	// Token returns the bearer token for a remote server. It is asked on
	// every request, so rotation needs no restart, and decides which
	// servers may have a token at all.
	Token func(cfg *config.Server) (token string, ok bool, err error)
	// ResolveCommand, if set, returns the absolute path to launch for a
	// stdio server (e.g. after checking its pinned hash), or "" to launch
	// the command as configured; an error stops the start.
	ResolveCommand func(ctx context.Context, cfg *config.Server) (string, error)
	// Transport, if set and it returns a transport, reaches the server
	// through it instead of its configured command or URL (tests, and
	// programs embedding servers in process).
	Transport func(cfg *config.Server) mcp.Transport
	// MaxResponseBytes bounds one message from a server whose config sets
	// no max_response_bytes: an HTTP response body, an SSE event, a stdio
	// line (default config.DefaultMaxResponseBytes).
	MaxResponseBytes int64
	// OnEgress receives every connection a stdio server with an egress
	// policy made or tried through its proxy (see package egress). It is
	// called from the proxy's goroutines.
	OnEgress func(egress.Event)
	// OnMessage, if set, is shown every message a stdio or remote server
	// sends (the JSON-RPC bytes, valid only during the call), on the
	// goroutine reading the connection and in the order sent, before the
	// SDK client reads it: so before the result of a call that follows
	// it. It must be quick and must not keep the slice. Servers reached
	// through Transport are not shown.
	OnMessage func(server string, msg []byte)
	// ProbeNamespaces reports whether enforce mode can run (default
	// egress.Probe); tests use it to stand for a kernel that refuses.
	ProbeNamespaces func() error
}

// ServerOption configures one server at Add.
type ServerOption func(*Server)

// WithDialCheck makes every connection to the server run check on the
// address actually dialled (after name resolution), and refuses the
// connection when it returns an error. It applies to remote servers; such a
// server's requests never go through an HTTP proxy, whose address is all a
// dial check would see.
func WithDialCheck(check netguard.Check) ServerOption {
	return func(s *Server) { s.dialCheck = check }
}

// Manager owns every upstream server.
type Manager struct {
	opts Options
	log  *slog.Logger

	// ctx bounds background starts; it ends with Close.
	ctx    context.Context
	cancel context.CancelFunc
	// bg counts the manager's goroutines (starts, watchers, idle stops),
	// so Close returns only when all are done.
	bg sync.WaitGroup

	mu      sync.Mutex
	servers map[string]*Server
	closed  bool
}

// NewManager returns a Manager with no servers.
func NewManager(opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = config.DefaultMaxResponseBytes
	}
	if opts.ProbeNamespaces == nil {
		opts.ProbeNamespaces = egress.Probe
	}
	if opts.HTTPClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// net/http keeps two idle connections per host by default: calls
		// running at once on one server would close the rest after every
		// burst and dial (and handshake) again.
		t.MaxIdleConnsPerHost = 32
		opts.HTTPClient = &http.Client{Transport: t}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{opts: opts, log: opts.Logger, ctx: ctx, cancel: cancel, servers: map[string]*Server{}}
}

// ErrExists is returned by Add for a name already in use.
var ErrExists = errors.New("a server with this name already exists")

// Add registers a server without starting it.
func (m *Manager) Add(cfg *config.Server, opts ...ServerOption) (*Server, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errors.New("upstream manager is closed")
	}
	if _, ok := m.servers[cfg.Name]; ok {
		return nil, fmt.Errorf("server %q: %w", cfg.Name, ErrExists)
	}
	s := &Server{cfg: cfg, m: m, log: m.log.With("server", cfg.Name), idle: cfg.Idle(), callTimeout: cfg.CallLimit()}
	if s.callTimeout <= 0 {
		s.callTimeout = m.opts.CallTimeout
	}
	s.maxResponse = m.opts.MaxResponseBytes
	if v := cfg.MaxResponseBytes; v != nil {
		s.maxResponse = *v
	}
	for _, o := range opts {
		o(s)
	}
	if cfg.EgressOn() && !cfg.IsRemote() {
		s.egress = egress.New(egress.Options{Server: cfg.Name, Mode: cfg.Egress.Mode, Rules: cfg.Egress.Rules, Report: m.opts.OnEgress, Logger: m.log})
		s.egressMode = cfg.Egress.Mode
		if cfg.Egress.Mode == egress.ModeEnforce {
			// Said once at start, not at the first call: a server that
			// cannot run as configured should be known at once.
			if err := m.opts.ProbeNamespaces(); err != nil {
				if cfg.Egress.Fallback == egress.ModeMonitor {
					s.log.Warn("egress: enforce mode unavailable; this server runs in monitor mode (fallback), so a server ignoring HTTP_PROXY can still connect directly", "error", err)
				} else {
					s.log.Error("egress: enforce mode unavailable; this server will not start (set \"fallback\": \"monitor\" to run it with the proxy only)", "error", err)
				}
			}
		}
	}
	m.servers[cfg.Name] = s
	return s, nil
}

// Remove stops and forgets a server.
func (m *Manager) Remove(name string) {
	m.mu.Lock()
	s := m.servers[name]
	delete(m.servers, name)
	m.mu.Unlock()
	if s != nil {
		s.stop(true)
	}
}

// Get returns the server called name.
func (m *Manager) Get(name string) (*Server, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.servers[name]
	return s, ok
}

// Servers returns every server sorted by name.
func (m *Manager) Servers() []*Server {
	m.mu.Lock()
	out := make([]*Server, 0, len(m.servers))
	for _, s := range m.servers {
		out = append(out, s)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].cfg.Name < out[j].cfg.Name })
	return out
}

// Close stops every server and waits for their processes and the
// manager's goroutines to end.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	servers := make([]*Server, 0, len(m.servers))
	for _, s := range m.servers {
		servers = append(servers, s)
	}
	m.mu.Unlock()
	m.cancel()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func() { defer wg.Done(); s.stop(true) }()
	}
	wg.Wait()
	m.bg.Wait()
	return nil
}

// Server is one upstream MCP server.
//
//	stopped ──call──▶ starting ──▶ idle ⇄ running ──idle_timeout──▶ stopped
//	                     │                  │
//	                  fails              exits / connection breaks
//	                     ▼                  ▼
//	                   failed ◀─────────────┘   the next call starts it again
//	                                            (after a backoff once it keeps failing)
type Server struct {
	cfg         *config.Server
	m           *Manager
	log         *slog.Logger
	idle        time.Duration // 0: never stopped for idleness
	callTimeout time.Duration
	maxResponse int64          // bytes in one message from the server
	dialCheck   netguard.Check // nil: any address
	egress      *egress.Proxy  // nil: egress off
	probe       probe          // what the HTTP exchanges of the last start saw

	mu       sync.Mutex
	conn     *conn      // the live connection, nil when down
	starting *startCall // the start in progress, if any
	closed   bool       // removed, or the manager closed: never starts again
	failed   bool       // down because of a failure rather than a stop
	lastErr  error
	// The idle stop: one timer per server, armed lazily. A call moves
	// idleAt and leaves the timer alone; when the timer fires before
	// idleAt it sets itself again for the rest (a new AfterFunc per call
	// cost a timer and a closure on every call).
	idleTimer *time.Timer
	idleSet   bool      // idleTimer is set to fire (or firing)
	idleAt    time.Time // when the connection stops if no call comes; zero: not armed
	started   time.Time
	lastCall  time.Time
	starts    int
	restarts  int
	fails     int       // consecutive failures; reset by an answered request or a clean stop
	retryAt   time.Time // no start before this
	// egressMode is the egress mode the last start used: the configured
	// one, or monitor after a fallback.
	egressMode string

	// token, set on a per-principal connection (see Scoped), replaces
	// Options.Token for it.
	token func() (string, bool, error)
	// parent is the server a per-principal connection belongs to.
	parent *Server
	// scoped are the per-principal connections, by key; guarded by mu.
	scoped map[string]*Server
}

// conn is one live session with a server.
type conn struct {
	sess     *mcp.ClientSession
	proc     *process // nil for remote servers
	raw      *rawLeg  // tools/call as bytes (stdio servers); nil otherwise
	http     *httpLeg // tools/call as bytes (streamable HTTP servers); nil otherwise
	inflight int      // requests using it; guarded by Server.mu
	// cancel ends the context of a legacy SSE stream; nil otherwise.
	cancel context.CancelFunc
}

// close ends the session and, for a stdio server, its process group.
func (c *conn) close() {
	_ = c.sess.Close()
	if c.cancel != nil {
		c.cancel()
	}
	if c.proc != nil {
		c.proc.stop()
	}
}

// startCall is a start in progress, shared by every caller that finds the
// server stopped (singleflight). The new connection is handed to its
// waiters already counted in flight, so an idle timeout shorter than their
// wake-up cannot stop it under them.
type startCall struct {
	done     chan struct{}
	waiters  int   // guarded by Server.mu
	finished bool  // guarded by Server.mu
	conn     *conn // set with finished, on success
	err      error
}

// Name is the server's name.
func (s *Server) Name() string { return s.cfg.Name }

// Config is the server's configuration.
func (s *Server) Config() *config.Server { return s.cfg }

// Status is a snapshot of a server's state.
type Status struct {
	Name      string `json:"name"`
	State     State  `json:"state"`
	Transport string `json:"transport"`
	Lazy      bool   `json:"lazy,omitempty"`
	// Starting is true while a start is in progress.
	Starting bool `json:"starting,omitempty"`
	InFlight int  `json:"in_flight"`
	// PID of a running stdio server's process (and process group).
	PID       int       `json:"pid,omitempty"`
	LastError string    `json:"last_error,omitempty"`
	Started   time.Time `json:"started,omitzero"`
	LastCall  time.Time `json:"last_call,omitzero"`
	// IdleStopAt is when an idle server will be stopped.
	IdleStopAt time.Time `json:"idle_stop_at,omitzero"`
	// NextAttempt is, for a failed server in backoff, the earliest time it
	// will be started again.
	NextAttempt time.Time `json:"next_attempt,omitzero"`
	// Starts counts successful starts; Restarts those that followed a
	// failure (a crash or a failed start).
	Starts              int     `json:"starts"`
	Restarts            int     `json:"restarts"`
	ConsecutiveFailures int     `json:"consecutive_failures,omitempty"`
	IdleTimeout         float64 `json:"idle_timeout"` // seconds; 0: never
	CallTimeout         float64 `json:"call_timeout"` // seconds
	// Egress is the server's network policy and what its proxy has seen;
	// nil when egress is off.
	Egress *EgressStatus `json:"egress,omitempty"`
}

// EgressStatus is a server's egress mode and its proxy's totals.
type EgressStatus struct {
	Mode string `json:"mode"`
	// Configured is the configured mode when Mode differs from it (a
	// fallback from enforce to monitor).
	Configured string `json:"configured,omitempty"`
	Allow      int    `json:"allow"` // entries of the allow list
	egress.Stats
}

// Status returns a snapshot of the server's state.
func (s *Server) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{
		Name: s.cfg.Name, Transport: s.cfg.Transport, Lazy: s.cfg.Lazy,
		Starting: s.starting != nil, Started: s.started, LastCall: s.lastCall,
		Starts: s.starts, Restarts: s.restarts, ConsecutiveFailures: s.fails,
		IdleTimeout: s.idle.Seconds(), CallTimeout: s.callTimeout.Seconds(),
	}
	switch c := s.conn; {
	case c != nil && c.inflight > 0:
		st.State, st.InFlight = StateRunning, c.inflight
	case c != nil:
		st.State, st.IdleStopAt = StateIdle, s.idleAt
	case s.failed:
		st.State = StateFailed
		if time.Now().Before(s.retryAt) {
			st.NextAttempt = s.retryAt
		}
	default:
		st.State = StateStopped
	}
	if c := s.conn; c != nil && c.proc != nil {
		st.PID = c.proc.pid()
	}
	if s.lastErr != nil {
		st.LastError = s.lastErr.Error()
	}
	if s.egress != nil {
		es := &EgressStatus{Mode: s.egressMode, Allow: len(s.cfg.Egress.Rules), Stats: s.egress.Stats()}
		if s.egressMode != s.cfg.Egress.Mode {
			es.Configured = s.cfg.Egress.Mode
		}
		st.Egress = es
	}
	return st
}

// BackoffError refuses a call to a server that keeps failing, until its
// next attempt is due.
type BackoffError struct {
	Server   string
	Failures int
	Next     time.Time
	Last     error
}

func (e *BackoffError) Error() string {
	wait := time.Until(e.Next).Round(time.Millisecond)
	return fmt.Sprintf("server %q failed %d times in a row and is not restarted before %s (in %s); last error: %v",
		e.Server, e.Failures, e.Next.Format("15:04:05.000"), wait, e.Last)
}

func (e *BackoffError) Unwrap() error { return e.Last }

// backoff is the wait before the next start after n consecutive failures.
func backoff(n int) time.Duration {
	if n < 2 {
		return 0
	}
	d := BackoffMin
	for i := 2; i < n && d < BackoffMax; i++ {
		d *= 2
	}
	return min(d, BackoffMax)
}

// acquire returns the live connection, starting the server if it is down,
// and counts the caller as in flight until release.
func (s *Server) acquire(ctx context.Context) (*conn, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, fmt.Errorf("server %q: %w", s.cfg.Name, ErrClosed)
		}
		if c := s.conn; c != nil {
			c.inflight++
			s.disarmIdle()
			s.mu.Unlock()
			return c, nil
		}
		sc := s.starting
		if sc == nil {
			if now := time.Now(); now.Before(s.retryAt) {
				err := &BackoffError{Server: s.cfg.Name, Failures: s.fails, Next: s.retryAt, Last: s.lastErr}
				s.mu.Unlock()
				return nil, err
			}
			sc = &startCall{done: make(chan struct{})}
			s.starting = sc
			s.m.bg.Add(1)
			go s.start(sc)
		}
		sc.waiters++
		s.mu.Unlock()
		select {
		case <-sc.done:
			if sc.err != nil {
				return nil, sc.err
			}
			return sc.conn, nil // counted in flight by start
		case <-ctx.Done():
			s.mu.Lock()
			if !sc.finished {
				sc.waiters--
				s.mu.Unlock()
			} else {
				s.mu.Unlock()
				if sc.conn != nil {
					s.release(sc.conn, false, false)
				}
			}
			return nil, ctx.Err()
		}
	}
}

// release ends a request that acquire counted. ok says the server answered
// it, which proves it works and clears its failure count.
func (s *Server) release(c *conn, call, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.inflight--
	if call {
		s.lastCall = time.Now()
	}
	if ok {
		s.fails = 0
	}
	if c.inflight == 0 && s.conn == c {
		s.armIdle()
	}
}

// armIdle (s.mu held) schedules the idle stop of the current connection.
func (s *Server) armIdle() {
	if s.idle <= 0 {
		s.idleAt = time.Time{}
		return
	}
	s.idleAt = time.Now().Add(s.idle)
	switch {
	case s.idleTimer == nil:
		s.idleTimer = time.AfterFunc(s.idle, s.idleExpired)
	case !s.idleSet:
		s.idleTimer.Reset(s.idle)
	}
	s.idleSet = true
}

// disarmIdle (s.mu held) cancels any armed idle stop: the timer, if set,
// finds nothing to do when it fires.
func (s *Server) disarmIdle() { s.idleAt = time.Time{} }

// stopIdle (s.mu held) cancels any armed idle stop and its timer.
func (s *Server) stopIdle() {
	s.idleAt = time.Time{}
	if s.idleTimer != nil && s.idleTimer.Stop() {
		s.idleSet = false
	}
}

func (s *Server) idleExpired() {
	s.mu.Lock()
	s.idleSet = false
	c := s.conn
	if s.idleAt.IsZero() || c == nil || c.inflight > 0 || s.closed {
		s.mu.Unlock()
		return
	}
	if d := time.Until(s.idleAt); d > 0 {
		// A call came since the timer was set: wait for the rest.
		s.idleTimer.Reset(d)
		s.idleSet = true
		s.mu.Unlock()
		return
	}
	s.conn = nil
	s.fails = 0
	s.idleAt = time.Time{}
	s.m.bg.Add(1)
	s.mu.Unlock()
	defer s.m.bg.Done()
	s.log.Info("stopping idle upstream; it starts again on the next call", "idle_timeout", s.idle)
	c.close()
}

// start connects the server for a startCall; it runs on its own goroutine
// so a caller that gives up does not abort the start for the others.
func (s *Server) start(sc *startCall) {
	defer s.m.bg.Done()
	ctx, cancel := context.WithTimeout(s.m.ctx, s.m.opts.ConnectTimeout)
	defer cancel()
	c, err := s.connect(ctx)
	s.mu.Lock()
	s.starting = nil
	sc.finished = true
	switch {
	case err == nil && s.closed:
		s.mu.Unlock()
		c.close()
		sc.err = fmt.Errorf("server %q: %w", s.cfg.Name, ErrClosed)
		close(sc.done)
		return
	case err != nil:
		if ctx.Err() != nil && s.m.ctx.Err() == nil {
			err = fmt.Errorf("%w (no handshake within %s)", err, s.m.opts.ConnectTimeout)
		}
		err = fmt.Errorf("server %q: %w", s.cfg.Name, err)
		s.fail(err)
		s.mu.Unlock()
		s.log.Warn("upstream failed to start", "error", err, "consecutive_failures", s.fails)
		sc.err = err
		close(sc.done)
		return
	}
	s.conn = c
	s.starts++
	if s.failed {
		s.restarts++
	}
	s.failed = false
	s.started = time.Now()
	sc.conn, c.inflight = c, sc.waiters
	if c.inflight == 0 {
		s.armIdle()
	}
	starts := s.starts
	s.m.bg.Add(1)
	go s.watch(c)
	if f := s.m.opts.OnStarted; f != nil && s.parent == nil {
		s.m.bg.Add(1)
		go func() { defer s.m.bg.Done(); f(s.cfg.Name, starts) }()
	}
	s.mu.Unlock()
	attrs := []any{"starts", starts}
	if c.proc != nil {
		attrs = append(attrs, "pid", c.proc.pid())
	}
	if s.egress != nil {
		s.mu.Lock()
		attrs = append(attrs, "egress", s.egressMode)
		s.mu.Unlock()
	}
	s.log.Info("upstream started", attrs...)
	close(sc.done)
}

// fail (s.mu held) records a failure and schedules the earliest next start.
func (s *Server) fail(err error) {
	s.failed = true
	s.lastErr = err
	s.fails++
	s.retryAt = time.Now().Add(backoff(s.fails))
}

// watch waits for a connection to end. If it was still the current one,
// the server exited or dropped it: mark it failed so the next call starts
// it again. Either way, make sure its process group is gone.
func (s *Server) watch(c *conn) {
	defer s.m.bg.Done()
	var err error
	if c.proc == nil {
		err = c.sess.Wait()
	} else {
		ended := make(chan error, 1)
		go func() { ended <- c.sess.Wait() }()
		select {
		case err = <-ended:
		case <-c.proc.exited:
			err = fmt.Errorf("the process ended with %s", c.proc.exitDescription())
			s.lost(c, err)
			// Its group is gone; a response it wrote before exiting may
			// still be in the pipe, so let the session drain it, unless
			// an escaped process holds stdout open.
			t := time.NewTimer(stopGrace)
			select {
			case <-ended:
			case <-t.C:
				_ = c.sess.Close()
				<-ended
			}
			t.Stop()
		}
	}
	s.lost(c, err)
	// Close even a session the server ended: the SDK releases some of its
	// goroutines (the subscription listener) only on Close.
	c.close()
}

// lost marks c down if it is still the server's connection.
func (s *Server) lost(c *conn, err error) {
	s.mu.Lock()
	if s.conn != c {
		s.mu.Unlock()
		return
	}
	s.conn = nil
	s.stopIdle()
	if err == nil || errors.Is(err, io.EOF) {
		err = errors.New("the server closed the connection")
	}
	s.fail(err)
	fails, next := s.fails, s.retryAt
	s.mu.Unlock()
	attrs := []any{"error", err, "consecutive_failures", fails}
	if d := time.Until(next); d > 0 {
		attrs = append(attrs, "next_attempt_in", d.Round(time.Millisecond))
	}
	s.log.Warn("upstream disconnected; it restarts on the next call", attrs...)
}

// ProtocolVersion is the protocol revision toolgate offers upstream
// servers unless told otherwise. The newest (2026-07-28) puts per-request
// metadata on every message, which costs tens of microseconds a call, and
// no relayed feature needs it: the stateless frontend answers its clients
// in their revision whatever the upstream speaks. A server that supports
// only older revisions negotiates down from it as before.
const ProtocolVersion = "2025-11-25"

func (m *Manager) sessionOptions() *mcp.ClientSessionOptions {
	v := m.opts.ProtocolVersion
	if v == "" {
		v = ProtocolVersion
	}
	return &mcp.ClientSessionOptions{ProtocolVersion: v}
}

func (s *Server) connect(ctx context.Context) (*conn, error) {
	var copts mcp.ClientOptions
	if f := s.m.opts.ClientOptions; f != nil {
		copts = f(s.cfg.Name)
	}
	next := copts.ToolListChangedHandler
	copts.ToolListChangedHandler = func(ctx context.Context, req *mcp.ToolListChangedRequest) {
		if f := s.m.opts.OnToolsChanged; f != nil {
			go f(s.cfg.Name)
		}
		if next != nil {
			next(ctx, req)
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolgate", Version: Version}, &copts)
	if f := s.m.opts.ClientMiddleware; f != nil {
		client.AddReceivingMiddleware(f(s.cfg.Name)...)
	}
	if f := s.m.opts.Transport; f != nil {
		if t := f(s.cfg); t != nil {
			sess, err := client.Connect(ctx, t, s.m.sessionOptions())
			if err != nil {
				return nil, err
			}
			return &conn{sess: sess}, nil
		}
	}
	if !s.cfg.IsRemote() {
		p, err := s.startProcess(ctx)
		if err != nil {
			return nil, fmt.Errorf("start %q: %w", s.cfg.Command, err)
		}
		t, raw := p.transport(s.lineLimit(), s.onMessage())
		sess, err := client.Connect(ctx, t, s.m.sessionOptions())
		if err != nil {
			p.stop()
			return nil, p.startError(fmt.Errorf("start %q: %w", s.cfg.Command, err))
		}
		return &conn{sess: sess, proc: p, raw: raw}, nil
	}
	hc, err := s.httpClient()
	if err != nil {
		return nil, err
	}
	s.probe.reset()
	// A legacy SSE transport keeps the GET it connects with as the
	// server-to-client stream for the whole session, and binds it to the
	// context it is given. The connect timeout's context ends when start
	// returns, which would close the stream and the session with it; so the
	// stream gets a context of its own that lives as long as the connection,
	// and the connect timeout cancels it only while connecting.
	lctx, lcancel := context.WithCancel(s.m.ctx)
	stop := context.AfterFunc(ctx, lcancel)
	connected := func(sess *mcp.ClientSession) (*conn, error) {
		if !stop() {
			// The timeout fired as the handshake finished: the stream is
			// gone, so the session is of no use.
			_ = sess.Close()
			lcancel()
			return nil, context.Cause(ctx)
		}
		return &conn{sess: sess, cancel: lcancel}, nil
	}
	sse := func() (*mcp.ClientSession, error) {
		return client.Connect(ctx, &streamContext{Transport: &mcp.SSEClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxEventSize: s.sdkEventLimit()}, ctx: lctx}, s.m.sessionOptions())
	}
	if s.cfg.Transport == config.TransportSSE {
		sess, err := sse()
		if err != nil {
			stop()
			lcancel()
			return nil, fmt.Errorf("connect (sse): %w", err)
		}
		return connected(sess)
	}
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxRetries: -1, MaxEventSize: s.sdkEventLimit()}, s.m.sessionOptions())
	if err == nil {
		c, err := connected(sess)
		if err == nil && s.m.opts.ClientMiddleware == nil {
			changed := copts.ToolListChangedHandler
			c.http = newHTTPLeg(hc, s.cfg.URL, sess, &copts, func() { changed(context.Background(), &mcp.ToolListChangedRequest{}) }, s.maxResponse)
		}
		return c, err
	}
	if ctx.Err() != nil {
		stop()
		lcancel()
		return nil, fmt.Errorf("connect (streamable http): %w", err)
	}
	sess, sseErr := sse()
	if sseErr != nil {
		stop()
		lcancel()
		return nil, fmt.Errorf("connect: streamable http: %w; sse fallback: %v", err, sseErr)
	}
	s.log.Info("streamable HTTP failed; connected over legacy SSE", "streamable_error", err)
	return connected(sess)
}

// onMessage is the tap of this server's messages, or nil.
func (s *Server) onMessage() func([]byte) {
	f := s.m.opts.OnMessage
	if f == nil {
		return nil
	}
	name := s.cfg.Name
	return func(msg []byte) { f(name, msg) }
}

// streamContext connects its transport with a context of its own instead of
// the one Connect is given (see connect).
type streamContext struct {
	mcp.Transport
	ctx context.Context
}

func (t *streamContext) Connect(context.Context) (mcp.Connection, error) {
	return t.Transport.Connect(t.ctx)
}

// ListTools lists every tool of the server, following pagination, starting
// the server if it is down.
func (s *Server) ListTools(ctx context.Context) ([]*mcp.Tool, error) {
	c, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	return s.listTools(ctx, c)
}

// ListToolsIfRunning lists the tools only if the server is connected; it
// never starts it (running false). It is for refreshing the catalogue after
// a start, which must not keep a server from its idle stop by starting it
// again.
func (s *Server) ListToolsIfRunning(ctx context.Context) (tools []*mcp.Tool, running bool, err error) {
	s.mu.Lock()
	c := s.conn
	if c == nil || s.closed {
		s.mu.Unlock()
		return nil, false, nil
	}
	c.inflight++
	s.disarmIdle()
	s.mu.Unlock()
	tools, err = s.listTools(ctx, c)
	return tools, true, err
}

// listTools lists on c, which the caller acquired, and releases it.
func (s *Server) listTools(ctx context.Context, c *conn) ([]*mcp.Tool, error) {
	var err error
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	var tools []*mcp.Tool
	for t, lerr := range c.sess.Tools(ctx, nil) {
		if lerr != nil {
			err = fmt.Errorf("list tools: %w", lerr)
			break
		}
		tools = append(tools, t)
	}
	if err != nil && connBroken(err) {
		s.lost(c, err)
	}
	s.release(c, false, err == nil)
	if err != nil {
		return nil, err
	}
	return tools, nil
}

// CallTool calls tool (the upstream's own name) with args, starting the
// server if it is down. The call is cancelled upstream (the SDK sends
// notifications/cancelled) when ctx ends or the server's call timeout
// passes.
func (s *Server) CallTool(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	return s.Call(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
}

// Call is CallTool with the whole params: arguments as any value that
// encodes to a JSON object (json.RawMessage is forwarded as it is) and the
// _meta to send. It alone owns a call's timeout, its retry before sending
// and its cancellation; an upstream's JSON-RPC error is returned as the
// *jsonrpc.Error it sent.
func (s *Server) Call(ctx context.Context, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	for attempt := 0; ; attempt++ {
		c, err := s.acquire(ctx)
		if err != nil {
			return nil, err
		}
		res, err := s.callOnce(ctx, c, params)
		retry := false
		if err != nil && ctx.Err() == nil && connBroken(err) {
			s.lost(c, err)
			// A connection that had already broken (the server died, but
			// the watcher has not noticed yet) refuses the call before
			// sending it, so it is safe to try once on a fresh one. A call
			// that was sent is never repeated: the tool may have acted.
			if attempt == 0 && errors.Is(err, mcp.ErrConnectionClosed) {
				retry = true
			} else {
				err = fmt.Errorf("server %q exited or closed the connection while the call was in flight (%v)", s.cfg.Name, err)
			}
		}
		s.release(c, true, err == nil)
		if !retry {
			return res, err
		}
	}
}

// errCallTimeout is the cause of a call's context when its timeout passed.
var errCallTimeout = errors.New("call timeout")

func (s *Server) callOnce(ctx context.Context, c *conn, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	cctx, cancel := context.WithTimeoutCause(ctx, s.callTimeout, errCallTimeout)
	defer cancel()
	res, err := c.sess.CallTool(cctx, params)
	if err != nil {
		if ctx.Err() == nil && errors.Is(context.Cause(cctx), errCallTimeout) {
			return nil, fmt.Errorf("server %q did not answer within %s (its call_timeout); the call was cancelled upstream", s.cfg.Name, s.callTimeout)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("call cancelled by the caller; cancellation sent to server %q: %w", s.cfg.Name, ctx.Err())
		}
		return nil, err
	}
	return res, nil
}

// connBroken reports whether err means the connection is gone, rather than
// the server answering with an error.
func connBroken(err error) bool {
	return errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrClosed)
}

// Stop ends the server's session and, for stdio servers, its process
// group: close stdin, wait; SIGTERM the group, wait; SIGKILL it. A later
// call starts the server again.
func (s *Server) Stop() { s.stop(false) }

// stop stops the server; final also keeps it from ever starting again.
func (s *Server) stop(final bool) {
	s.mu.Lock()
	if final {
		s.closed = true
	}
	sc := s.starting
	s.mu.Unlock()
	if sc != nil {
		<-sc.done // bounded by the connect timeout and the manager's life
	}
	s.mu.Lock()
	c := s.conn
	s.conn = nil
	s.stopIdle()
	s.mu.Unlock()
	if c != nil {
		c.close()
	}
	if final && s.egress != nil {
		s.egress.Close()
	}
	s.mu.Lock()
	children := make([]*Server, 0, len(s.scoped))
	for _, c := range s.scoped {
		children = append(children, c)
	}
	s.mu.Unlock()
	for _, c := range children {
		c.stop(final)
	}
}
