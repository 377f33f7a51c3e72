package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"
	"golang.org/x/time/rate"

	"github.com/toolgate/toolgate/internal/netguard"
)

// Decisions of an Event.
const (
	Allow = "allow" // connected and relayed
	Block = "block" // refused by the policy
	Error = "error" // admitted, but the connection failed
)

// Event is one connection through (or refused by) a server's proxy.
type Event struct {
	Server string
	// Host and Port are what the server asked for.
	Host string
	Port uint16
	// Addr is the address dialled, when a dial was made.
	Addr string
	// Method is CONNECT for a tunnel, else the HTTP method forwarded.
	Method   string
	Decision string
	Reason   string
	// BytesOut went from the server to the host, BytesIn back.
	BytesOut, BytesIn int64
	Duration          time.Duration
	// Mode is the server's egress mode.
	Mode string
}

// Stats are a proxy's totals since it was made.
type Stats struct {
	Connections   int64     `json:"connections"`
	Refused       int64     `json:"refused"`
	BytesOut      int64     `json:"bytes_out"`
	BytesIn       int64     `json:"bytes_in"`
	LastRefused   string    `json:"last_refused,omitempty"`
	LastRefusedAt time.Time `json:"last_refused_at,omitzero"`
	// Unreported counts refused connections beyond the event rate limit:
	// counted here, not recorded one by one.
	Unreported int64 `json:"unreported,omitempty"`
	// Direct counts connections a monitor-mode server was seen holding
	// outside the proxy.
	Direct int64 `json:"direct,omitempty"`
}

// Options configure a Proxy.
type Options struct {
	Server string
	Mode   string
	Rules  Rules
	// Report receives every connection's event, from the proxy's
	// goroutines; it must not block for long.
	Report func(Event)
	Logger *slog.Logger
	// DialTimeout bounds one dial (default 10s).
	DialTimeout time.Duration
	// IdleTimeout ends a tunnel or a plain HTTP exchange that moves no
	// byte for this long (default 5m).
	IdleTimeout time.Duration
	// MaxConns bounds the server's open connections to the proxy, tunnels
	// included (default 64).
	MaxConns int
}

// Bounds of the proxy.
const (
	maxHeaderBytes    = 16 << 10
	readHeaderTimeout = 10 * time.Second
	defaultMaxConns   = 64
	defaultDial       = 10 * time.Second
	defaultIdle       = 5 * time.Minute
	// Refused connections are recorded at up to refusedRate a second
	// (refusedBurst at once); a server hammering denied hosts cannot
	// flood the audit log.
	refusedRate  = 10
	refusedBurst = 50
)

// Proxy is one server's forward proxy. It serves any number of listeners
// (one per start of the server) until Close.
type Proxy struct {
	opts    Options
	log     *slog.Logger
	dialer  *net.Dialer
	http    *http.Server
	forward *http.Transport
	limiter *rate.Limiter

	conns, refused, bytesOut, bytesIn, unreported, directs atomic.Int64

	mu            sync.Mutex
	mode          string
	lastRefused   string
	lastRefusedAt time.Time
	listeners     map[net.Listener]bool
	closed        bool
}

// New returns a proxy applying opts.Rules; it listens on nothing until
// Serve.
func New(opts Options) *Proxy {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = defaultDial
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = defaultIdle
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = defaultMaxConns
	}
	p := &Proxy{
		opts:      opts,
		log:       opts.Logger.With("server", opts.Server),
		limiter:   rate.NewLimiter(refusedRate, refusedBurst),
		listeners: map[net.Listener]bool{},
		mode:      opts.Mode,
	}
	p.dialer = netguard.Dialer(&net.Dialer{Timeout: opts.DialTimeout}, opts.Rules.CheckAddr)
	p.forward = &http.Transport{
		Proxy:                  nil, // never chain to the gateway's own proxy
		DialContext:            p.dialer.DialContext,
		MaxIdleConns:           8,
		IdleConnTimeout:        90 * time.Second,
		ResponseHeaderTimeout:  opts.IdleTimeout,
		MaxResponseHeaderBytes: 64 << 10,
		DisableCompression:     true,
	}
	p.http = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: readHeaderTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		IdleTimeout:       opts.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	return p
}

// Serve serves l until it or the proxy is closed. The proxy closes l.
func (p *Proxy) Serve(l net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return http.ErrServerClosed
	}
	p.listeners[l] = true
	p.mu.Unlock()
	err := p.http.Serve(netutil.LimitListener(l, p.opts.MaxConns))
	p.mu.Lock()
	delete(p.listeners, l)
	p.mu.Unlock()
	return err
}

// Close stops every listener and open connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.http.Close()
	p.forward.CloseIdleConnections()
	return err
}

// Stats returns the proxy's totals.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{
		Connections: p.conns.Load(), Refused: p.refused.Load(),
		BytesOut: p.bytesOut.Load(), BytesIn: p.bytesIn.Load(),
		LastRefused: p.lastRefused, LastRefusedAt: p.lastRefusedAt,
		Unreported: p.unreported.Load(), Direct: p.directs.Load(),
	}
}

// ProxyEnv returns the variables that point a child at a proxy listening
// on addr (host:port). NO_PROXY is set empty, so nothing inherited lets the
// child bypass it; NODE_USE_ENV_PROXY makes Node (24 and later) honour the
// variables in fetch and http.
func ProxyEnv(addr string) []string {
	u := "http://" + addr
	return []string{
		"HTTP_PROXY=" + u, "http_proxy=" + u,
		"HTTPS_PROXY=" + u, "https_proxy=" + u,
		"ALL_PROXY=" + u, "all_proxy=" + u,
		"NO_PROXY=", "no_proxy=",
		"NODE_USE_ENV_PROXY=1",
	}
}

// RefusedError is a connection the policy refused.
type RefusedError struct {
	Target string
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("toolgate egress: connection to %s refused: %s", e.Target, e.Reason)
}

// ServeHTTP handles CONNECT (a TLS tunnel, or any TCP stream) and plain
// HTTP requests in absolute form.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if !r.URL.IsAbs() {
		http.Error(w, "toolgate egress: this is a forward proxy; send CONNECT host:port or an absolute http:// URL", http.StatusBadRequest)
		return
	}
	if r.URL.Scheme != "http" {
		http.Error(w, fmt.Sprintf("toolgate egress: scheme %q is not forwarded (use CONNECT for https; the proxy does not intercept TLS)", r.URL.Scheme), http.StatusBadRequest)
		return
	}
	p.forwardHTTP(w, r)
}

// admit decides on a target as the server asked for it.
func (p *Proxy) admit(hostport string) (Target, error) {
	t, err := ParseTarget(hostport)
	if err != nil {
		return t, &RefusedError{Target: hostport, Reason: err.Error()}
	}
	if !p.opts.Rules.Admit(t) {
		return t, &RefusedError{Target: t.String(), Reason: fmt.Sprintf("not in server %q's egress allow list", p.opts.Server)}
	}
	return t, nil
}

// dialRefusal turns a dial-time refusal by the address check into a
// RefusedError; other errors are returned as they are.
func dialRefusal(t Target, err error) error {
	var re *netguard.RefusedError
	if errors.As(err, &re) {
		return &RefusedError{Target: t.String(), Reason: fmt.Sprintf("%s resolves to %v", t.Host, re.Err)}
	}
	return err
}

func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ev := Event{Method: http.MethodConnect}
	t, err := p.admit(r.Host)
	ev.Host, ev.Port = t.Host, t.Port
	if err != nil {
		p.refuse(w, ev, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.opts.DialTimeout)
	up, err := p.dialer.DialContext(ctx, "tcp", t.String())
	cancel()
	if err != nil {
		p.dialFailed(w, ev, t, err)
		return
	}
	defer up.Close()
	ev.Addr = up.RemoteAddr().String()
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "toolgate egress: cannot tunnel on this connection", http.StatusInternalServerError)
		return
	}
	down, brw, err := hj.Hijack()
	if err != nil {
		return
	}
	defer down.Close()
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ev.BytesIn = p.pipe(down, up, up)
	}()
	// Bytes the client sent after the CONNECT head are in brw's buffer.
	ev.BytesOut = p.pipe(up, io.MultiReader(io.LimitReader(brw.Reader, int64(brw.Reader.Buffered())), connReader{down}), down)
	wg.Wait()
	ev.Decision, ev.Duration = Allow, time.Since(start)
	p.done(ev)
}

// connReader hides a net.Conn's other methods (WriteTo) behind io.Reader.
type connReader struct{ c net.Conn }

func (u connReader) Read(b []byte) (int, error) { return u.c.Read(b) }

// pipe copies src to dst until src ends or goes idle, then half-closes
// dst; deadlines are set on conn, the connection src reads from.
func (p *Proxy) pipe(dst net.Conn, src io.Reader, conn net.Conn) int64 {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		_ = conn.SetReadDeadline(time.Now().Add(p.opts.IdleTimeout))
		k, err := src.Read(buf)
		if k > 0 {
			_ = dst.SetWriteDeadline(time.Now().Add(p.opts.IdleTimeout))
			w, werr := dst.Write(buf[:k])
			n += int64(w)
			if werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		_ = dst.Close()
	}
	return n
}

// hopHeaders are meaningful for one connection only (RFC 9110 7.6.1).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (p *Proxy) forwardHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ev := Event{Method: r.Method}
	hostport := r.URL.Host
	if r.URL.Port() == "" {
		hostport = net.JoinHostPort(r.URL.Hostname(), "80")
	}
	t, err := p.admit(hostport)
	ev.Host, ev.Port = t.Host, t.Port
	if err != nil {
		p.refuse(w, ev, err)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	// Dial exactly what was admitted; the Host header stays as sent.
	out.URL.Host = t.String()
	for _, h := range r.Header.Values("Connection") {
		for _, name := range strings.Split(h, ",") {
			out.Header.Del(strings.TrimSpace(name))
		}
	}
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	var sent counter
	if r.Body != nil && r.Body != http.NoBody {
		out.Body = &countingBody{ReadCloser: r.Body, n: &sent}
	}
	var addr string
	// An exchange that moves no byte for IdleTimeout is ended, whichever
	// side stalls.
	ctx, cancel := context.WithCancel(out.Context())
	defer cancel()
	idle := time.AfterFunc(p.opts.IdleTimeout, cancel)
	defer idle.Stop()
	resp, err := p.forward.RoundTrip(out.WithContext(withAddr(ctx, &addr)))
	ev.Addr = addr
	if err != nil {
		ev.BytesOut = sent.Load()
		p.dialFailed(w, ev, t, err)
		return
	}
	defer resp.Body.Close()
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	n := p.copyResponse(w, resp.Body, idle)
	ev.BytesIn, ev.BytesOut = n, sent.Load()
	ev.Decision, ev.Duration = Allow, time.Since(start)
	p.done(ev)
}

// copyResponse relays a response body, pushing the idle timer on at every
// read and bounding every write to the client by IdleTimeout.
func (p *Proxy) copyResponse(w http.ResponseWriter, body io.Reader, idle *time.Timer) int64 {
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := body.Read(buf)
		idle.Reset(p.opts.IdleTimeout)
		if k > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(p.opts.IdleTimeout))
			m, werr := w.Write(buf[:k])
			n += int64(m)
			if werr != nil {
				return n
			}
			_ = rc.Flush()
		}
		if err != nil {
			return n
		}
	}
}

type counter = atomic.Int64

type countingBody struct {
	io.ReadCloser
	n *counter
}

func (b *countingBody) Read(p []byte) (int, error) {
	k, err := b.ReadCloser.Read(p)
	b.n.Add(int64(k))
	return k, err
}

// withAddr records the address of the connection a forwarded request
// goes out on, new or reused.
func withAddr(ctx context.Context, addr *string) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { *addr = info.Conn.RemoteAddr().String() },
	})
}

// refuse answers a request the policy refused and records it.
func (p *Proxy) refuse(w http.ResponseWriter, ev Event, err error) {
	ev.Decision, ev.Reason = Block, err.Error()
	target := ev.Host
	if ev.Port != 0 {
		target = net.JoinHostPort(ev.Host, strconv.Itoa(int(ev.Port)))
	}
	var re *RefusedError
	if errors.As(err, &re) {
		target = re.Target
	}
	p.refused.Add(1)
	p.mu.Lock()
	p.lastRefused, p.lastRefusedAt = target, time.Now()
	p.mu.Unlock()
	w.Header().Set("X-Toolgate-Egress", "refused")
	http.Error(w, err.Error(), http.StatusForbidden)
	p.log.Info("egress refused", "target", target, "reason", ev.Reason)
	if !p.limiter.Allow() {
		p.unreported.Add(1)
		return
	}
	p.report(ev)
}

// dialFailed answers a request whose dial failed: refused by the address
// check (a name resolving to a private address) or a network error.
func (p *Proxy) dialFailed(w http.ResponseWriter, ev Event, t Target, err error) {
	if err := dialRefusal(t, err); errors.As(err, new(*RefusedError)) {
		p.refuse(w, ev, err)
		return
	}
	ev.Decision, ev.Reason = Error, err.Error()
	http.Error(w, fmt.Sprintf("toolgate egress: connection to %s failed: %v", t, err), http.StatusBadGateway)
	p.report(ev)
}

func (p *Proxy) done(ev Event) {
	p.conns.Add(1)
	p.bytesIn.Add(ev.BytesIn)
	p.bytesOut.Add(ev.BytesOut)
	p.report(ev)
}

// SetMode sets the mode events report (monitor after a fallback from
// enforce).
func (p *Proxy) SetMode(mode string) {
	p.mu.Lock()
	p.mode = mode
	p.mu.Unlock()
}

func (p *Proxy) report(ev Event) {
	p.mu.Lock()
	ev.Mode = p.mode
	p.mu.Unlock()
	ev.Server = p.opts.Server
	if f := p.opts.Report; f != nil {
		f(ev)
	}
}

// Fields renders an event for the audit log.
func (e Event) Fields() map[string]any {
	f := map[string]any{
		"host": e.Host, "port": int(e.Port), "method": e.Method, "decision": e.Decision,
		"bytes_in": e.BytesIn, "bytes_out": e.BytesOut, "mode": e.Mode,
	}
	if e.Addr != "" {
		f["addr"] = e.Addr
	}
	if e.Duration > 0 {
		f["duration_ms"] = e.Duration.Milliseconds()
	}
	return f
}
