// Package upstream manages the gateway's connections to MCP servers: stdio
// child processes (each in its own process group, so stopping one ends its
// whole tree) and remote servers over streamable HTTP or legacy SSE. Each
// server keeps one client session, reused by every call and re-established
// on the next call after it breaks.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/secrets"
)

// Defaults for connection handling.
const (
	DefaultConnectTimeout = 30 * time.Second
	DefaultCallTimeout    = 60 * time.Second
	// stopGrace is how long a child gets after its stdin closes, and again
	// after SIGTERM, before its process group is killed.
	stopGrace = 2 * time.Second
)

// Version is what the gateway reports as its client implementation.
var Version = "dev"

// State of an upstream.
type State string

const (
	StateStopped State = "stopped"
	StateRunning State = "running"
	StateFailed  State = "failed"
)

// Options configure a Manager.
type Options struct {
	Logger *slog.Logger
	// OnToolsChanged is called (on its own goroutine) when a server sends
	// notifications/tools/list_changed.
	OnToolsChanged func(server string)
	// ConnectTimeout bounds starting a server and its handshake.
	ConnectTimeout time.Duration
	// CallTimeout bounds one tool call.
	CallTimeout time.Duration
	// HTTPClient is the base client for remote servers (default: a client
	// with sane timeouts on the transport).
	HTTPClient *http.Client
	// ClientOptions, if set, gives the client options (handlers for
	// server-to-client requests and notifications) for a server's
	// session; the manager chains its own tools/list_changed handling onto
	// them.
	ClientOptions func(server string) mcp.ClientOptions
	// Token returns the bearer token for a remote server. It is asked on
	// every request, so rotation needs no restart, and decides which
	// servers may have a token at all.
	Token func(cfg *config.Server) (token string, ok bool, err error)
}

// Manager owns every upstream server.
type Manager struct {
	opts Options
	log  *slog.Logger

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
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return &Manager{opts: opts, log: opts.Logger, servers: map[string]*Server{}}
}

// ErrExists is returned by Add for a name already in use.
var ErrExists = errors.New("a server with this name already exists")

// Add registers a server without starting it.
func (m *Manager) Add(cfg *config.Server) (*Server, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errors.New("upstream manager is closed")
	}
	if _, ok := m.servers[cfg.Name]; ok {
		return nil, fmt.Errorf("server %q: %w", cfg.Name, ErrExists)
	}
	s := &Server{cfg: cfg, m: m, log: m.log.With("server", cfg.Name), state: StateStopped}
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
		s.Stop()
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

// Close stops every server and waits for their processes to end.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	servers := make([]*Server, 0, len(m.servers))
	for _, s := range m.servers {
		servers = append(servers, s)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func() { defer wg.Done(); s.Stop() }()
	}
	wg.Wait()
	return nil
}

// Server is one upstream MCP server.
type Server struct {
	cfg *config.Server
	m   *Manager
	log *slog.Logger

	// connMu serialises starting, so concurrent callers that find the
	// server stopped start it once.
	connMu sync.Mutex

	mu       sync.Mutex
	session  *mcp.ClientSession
	cmd      *exec.Cmd
	state    State
	lastErr  error
	started  time.Time
	lastCall time.Time
	restarts int
}

// Name is the server's name.
func (s *Server) Name() string { return s.cfg.Name }

// Config is the server's configuration.
func (s *Server) Config() *config.Server { return s.cfg }

// Status is a snapshot of a server's state.
type Status struct {
	Name      string    `json:"name"`
	State     State     `json:"state"`
	LastError string    `json:"last_error,omitempty"`
	Started   time.Time `json:"started,omitzero"`
	LastCall  time.Time `json:"last_call,omitzero"`
	Restarts  int       `json:"restarts"`
}

// Status returns a snapshot of the server's state.
func (s *Server) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Name: s.cfg.Name, State: s.state, Started: s.started, LastCall: s.lastCall, Restarts: s.restarts}
	if s.lastErr != nil {
		st.LastError = s.lastErr.Error()
	}
	return st
}

// Session returns the live client session, starting the server if needed.
func (s *Server) Session(ctx context.Context) (*mcp.ClientSession, error) {
	s.mu.Lock()
	if sess := s.session; sess != nil {
		s.mu.Unlock()
		return sess, nil
	}
	s.mu.Unlock()

	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.mu.Lock()
	if sess := s.session; sess != nil {
		s.mu.Unlock()
		return sess, nil
	}
	restart := !s.started.IsZero()
	s.mu.Unlock()

	cctx, cancel := context.WithTimeout(ctx, s.m.opts.ConnectTimeout)
	defer cancel()
	sess, cmd, err := s.connect(cctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.state = StateFailed
		s.lastErr = err
		return nil, err
	}
	s.session, s.cmd = sess, cmd
	s.state, s.lastErr, s.started = StateRunning, nil, time.Now()
	if restart {
		s.restarts++
	}
	go s.watch(sess, cmd)
	return sess, nil
}

// watch marks the server down when its session ends, so the next call
// reconnects.
func (s *Server) watch(sess *mcp.ClientSession, cmd *exec.Cmd) {
	err := sess.Wait()
	s.mu.Lock()
	current := s.session == sess
	if current {
		s.session, s.cmd = nil, nil
		s.state = StateFailed
		if err == nil {
			err = errors.New("connection closed by the server")
		}
		s.lastErr = err
	}
	s.mu.Unlock()
	if current {
		s.log.Warn("upstream disconnected; it restarts on next use", "error", err)
		killGroup(cmd)
	}
}

func (s *Server) connect(ctx context.Context) (*mcp.ClientSession, *exec.Cmd, error) {
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
	if !s.cfg.IsRemote() {
		cmd := s.command()
		sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: stopGrace}, nil)
		if err != nil {
			killGroup(cmd)
			return nil, nil, fmt.Errorf("start %q: %w", s.cfg.Command, err)
		}
		return sess, cmd, nil
	}
	hc, err := s.httpClient()
	if err != nil {
		return nil, nil, err
	}
	if s.cfg.Transport == config.TransportSSE {
		sess, err := client.Connect(ctx, &mcp.SSEClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc}, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("connect (sse): %w", err)
		}
		return sess, nil, nil
	}
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxRetries: -1}, nil)
	if err == nil {
		return sess, nil, nil
	}
	if ctx.Err() != nil {
		return nil, nil, fmt.Errorf("connect (streamable http): %w", err)
	}
	sess, sseErr := client.Connect(ctx, &mcp.SSEClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc}, nil)
	if sseErr != nil {
		return nil, nil, fmt.Errorf("connect: streamable http: %v; sse fallback: %v", err, sseErr)
	}
	s.log.Info("streamable HTTP failed; connected over legacy SSE", "streamable_error", err)
	return sess, nil, nil
}

func (s *Server) command() *exec.Cmd {
	cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
	filter := secrets.EnvFilter{Allow: s.cfg.EnvAllow, Deny: s.cfg.EnvDeny}
	env, stripped := filter.Apply(os.Environ(), s.cfg.Env)
	cmd.Env = env
	if len(stripped) > 0 {
		// Names only: values never reach the log.
		level := slog.LevelDebug
		if len(s.cfg.EnvAllow)+len(s.cfg.EnvDeny) > 0 {
			level = slog.LevelInfo
		}
		s.log.Log(context.Background(), level, "environment variables withheld from the server", "names", strings.Join(stripped, ","))
	}
	cmd.Dir = s.cfg.Dir
	cmd.Stderr = &lineLogger{log: s.log}
	// Own process group: stopping the server must end what it spawned
	// (npx → node, shells), not just the direct child.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = stopGrace
	return cmd
}

func (s *Server) httpClient() (*http.Client, error) {
	origin, err := url.Parse(s.cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("url: %v", err)
	}
	base := s.m.opts.HTTPClient
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c := *base
	t := &headerTransport{base: rt, headers: s.cfg.Headers, scheme: origin.Scheme, host: origin.Host}
	if f := s.m.opts.Token; f != nil {
		cfg := s.cfg
		t.token = func() (string, bool, error) { return f(cfg) }
	}
	c.Transport = t
	return &c, nil
}

// headerTransport adds configured headers and the bearer token, but only
// to requests for the server's own origin: a redirect or an endpoint URL
// pointing elsewhere never carries them. The token is looked up for every
// request, so a rotated token is used from the next request on.
type headerTransport struct {
	base         http.RoundTripper
	headers      map[string]string
	token        func() (string, bool, error)
	scheme, host string
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.EqualFold(r.URL.Scheme, t.scheme) || !strings.EqualFold(r.URL.Host, t.host) {
		return t.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	if t.token != nil {
		tok, ok, err := t.token()
		if err != nil {
			return nil, err
		}
		if ok {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	return t.base.RoundTrip(r)
}

// ListTools lists every tool of the server, following pagination.
func (s *Server) ListTools(ctx context.Context) ([]*mcp.Tool, error) {
	sess, err := s.Session(ctx)
	if err != nil {
		return nil, err
	}
	var tools []*mcp.Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// CallTool calls tool (the upstream's own name) with args.
func (s *Server) CallTool(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	for attempt := 0; ; attempt++ {
		sess, err := s.Session(ctx)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.lastCall = time.Now()
		s.mu.Unlock()
		res, err := s.callOnce(ctx, sess, tool, args)
		// A session whose connection already broke (the server died, but
		// watch has not noticed yet) refuses the call before sending it,
		// so it is safe to drop that session and try once on a fresh one.
		if err != nil && attempt == 0 && errors.Is(err, mcp.ErrConnectionClosed) && s.dropBroken(sess) {
			continue
		}
		return res, err
	}
}

func (s *Server) callOnce(ctx context.Context, sess *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	cctx, cancel := context.WithTimeout(ctx, s.m.opts.CallTimeout)
	defer cancel()
	res, err := sess.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		if errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, fmt.Errorf("call timed out after %s", s.m.opts.CallTimeout)
		}
		return nil, err
	}
	return res, nil
}

// dropBroken forgets sess, whose connection is closing, if it is still the
// current session, the way watch does when it ends. It reports whether the
// server may be reconnected (it was not stopped meanwhile).
func (s *Server) dropBroken(sess *mcp.ClientSession) bool {
	s.mu.Lock()
	var cmd *exec.Cmd
	if s.session == sess {
		cmd = s.cmd
		s.session, s.cmd = nil, nil
		s.state = StateFailed
		s.lastErr = errors.New("connection closed by the server")
	}
	retry := s.state != StateStopped
	s.mu.Unlock()
	if cmd != nil {
		s.log.Warn("upstream disconnected; reconnecting")
		killGroup(cmd)
	}
	return retry
}

// Stop ends the server's session and, for stdio servers, its process group.
func (s *Server) Stop() {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.mu.Lock()
	sess, cmd := s.session, s.cmd
	s.session, s.cmd = nil, nil
	s.state = StateStopped
	s.mu.Unlock()
	if sess != nil {
		if err := sess.Close(); err != nil {
			s.log.Debug("close session", "error", err)
		}
	}
	killGroup(cmd)
}

// killGroup ends whatever is left of a stdio server's process group.
func killGroup(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	// The group id is the leader's pid (Setpgid). Signalling a group whose
	// members are all gone fails with ESRCH, which is the desired end state.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// lineLogger writes a child's stderr to the log a line at a time.
type lineLogger struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func (w *lineLogger) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimRight(string(w.buf[:i]), "\r"); line != "" {
			w.log.Info("upstream stderr", "line", line)
		}
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 64*1024 { // a child writing without newlines
		w.log.Info("upstream stderr", "line", string(w.buf))
		w.buf = w.buf[:0]
	}
	return len(p), nil
}
