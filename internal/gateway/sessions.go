package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionLimiter bounds the stateful HTTP sessions: anyone who can reach
// the listener can open one with a single initialize request, and each
// costs memory and goroutines until it ends. When a new session would
// exceed the cap, the one unused for longest is closed first; sessions
// being created count too, so a burst cannot overshoot it. It also closes
// a session idle for longer than idle (no POST in progress), as the SDK's
// session timeout would: the HTTP relay answers tool calls without the
// SDK, which would otherwise count a session used only for them as idle.
type sessionLimiter struct {
	server  *mcp.Server
	max     int
	idle    time.Duration // 0: never
	metrics *metrics
	log     *slog.Logger

	mu      sync.Mutex
	pending int                     // sessions being created
	live    map[string]*liveSession // by Mcp-Session-Id
}

type liveSession struct {
	ss *mcp.ServerSession
	// userID is the authenticated user who opened the session (the SDK
	// binds the session to it), "" without auth.
	userID string
	// ctx ends with the session.
	ctx      context.Context
	lastUsed time.Time
	active   int // requests in progress
	posts    int // POSTs in progress: the idle timer waits for none
	gets     int // GET streams open
	// relayed are the calls the HTTP relay serves, by id token, so that
	// the client's notifications/cancelled reaches them.
	relayed map[string]context.CancelFunc
	timer   *time.Timer
}

func newSessionLimiter(s *mcp.Server, max int, idle time.Duration, m *metrics, log *slog.Logger) *sessionLimiter {
	return &sessionLimiter{server: s, max: max, idle: idle, metrics: m, log: log, live: map[string]*liveSession{}}
}

func (l *sessionLimiter) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			done := l.use(id, r.Method)
			defer done()
			h.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r) // the SDK refuses it: no session
			return
		}
		if !l.reserve() {
			w.Header().Set("Retry-After", "5")
			http.Error(w, "too many sessions are being opened at once; retry later", http.StatusServiceUnavailable)
			return
		}
		var user string
		if ti := sdkauth.TokenInfoFromContext(r.Context()); ti != nil {
			user = ti.UserID // what the SDK binds the session to
		}
		// The session is live from its first answer on: the client may use
		// it (a GET stream, a call the relay takes) before this request's
		// handler has returned.
		rw := &registerOnAnswer{ResponseWriter: w, register: func() { l.register(w.Header().Get("Mcp-Session-Id"), user) }}
		h.ServeHTTP(rw, r)
		rw.registerOnce()
	})
}

// registerOnAnswer calls register once, when the response's header is
// written (or by registerOnce, if it never is).
type registerOnAnswer struct {
	http.ResponseWriter
	register func()
	once     sync.Once // the SDK may write from another goroutine
}

func (w *registerOnAnswer) registerOnce() { w.once.Do(w.register) }

func (w *registerOnAnswer) WriteHeader(code int) {
	w.registerOnce()
	w.ResponseWriter.WriteHeader(code)
}

func (w *registerOnAnswer) Write(b []byte) (int, error) {
	w.registerOnce()
	return w.ResponseWriter.Write(b)
}

func (w *registerOnAnswer) Flush() {
	w.registerOnce()
	_ = http.NewResponseController(w.ResponseWriter).Flush() // http.Flusher has no error to return
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *registerOnAnswer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// use marks a session as in use until done is called, so an idle session
// is evicted before it; a POST also holds off its idle timeout (a GET
// stream does not, as with the SDK's timeout).
func (l *sessionLimiter) use(id, method string) (done func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.live[id]
	if s == nil {
		return func() {}
	}
	s.active++
	s.lastUsed = time.Now()
	post, get := method == http.MethodPost, method == http.MethodGet
	if post {
		if s.posts++; s.posts == 1 && s.timer != nil {
			s.timer.Stop()
		}
	}
	if get {
		s.gets++
	}
	return func() {
		l.mu.Lock()
		s.active--
		s.lastUsed = time.Now()
		if post {
			if s.posts--; s.posts == 0 && s.timer != nil {
				s.timer.Reset(l.idle)
			}
		}
		if get {
			s.gets--
		}
		l.mu.Unlock()
	}
}

// startRelayed records a call the relay serves on s; false if a call with
// that id is in flight already.
func (l *sessionLimiter) startRelayed(s *liveSession, id string, cancel context.CancelFunc) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, dup := s.relayed[id]; dup {
		return false
	}
	if s.relayed == nil {
		s.relayed = map[string]context.CancelFunc{}
	}
	s.relayed[id] = cancel
	return true
}

func (l *sessionLimiter) endRelayed(s *liveSession, id string) {
	l.mu.Lock()
	delete(s.relayed, id)
	l.mu.Unlock()
}

// cancelRelayed cancels the call with id that the relay serves on s, if
// any.
func (l *sessionLimiter) cancelRelayed(s *liveSession, id string) bool {
	l.mu.Lock()
	cancel, ok := s.relayed[id]
	l.mu.Unlock()
	if ok {
		cancel()
	}
	return ok
}

// streaming says whether s has a GET stream open, on which the SDK sends
// what is not part of a request in flight.
func (l *sessionLimiter) streaming(s *liveSession) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return s.gets > 0
}

// lookup returns the live session with this id, or nil.
func (l *sessionLimiter) lookup(id string) *liveSession {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.live[id]
}

// reserve makes room for one new session, closing the least recently used
// ones as needed. It fails only when every slot is taken by sessions being
// created.
func (l *sessionLimiter) reserve() bool {
	var evict []*mcp.ServerSession
	defer func() {
		for _, ss := range evict {
			_ = ss.Close()
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.live)+l.pending >= l.max {
		// The least recently used session with no request in progress; if
		// every one has one (a GET stream each, say), the least recently
		// used of all, so holding streams open cannot lock others out.
		var oldestID string
		var oldest *liveSession
		better := func(s *liveSession) bool {
			if oldest == nil {
				return true
			}
			if (s.active == 0) != (oldest.active == 0) {
				return s.active == 0
			}
			return s.lastUsed.Before(oldest.lastUsed)
		}
		for id, s := range l.live {
			if better(s) {
				oldestID, oldest = id, s
			}
		}
		if oldest == nil {
			return false // every slot is a session being created
		}
		delete(l.live, oldestID)
		evict = append(evict, oldest.ss)
		l.metrics.sessionsEvicted.Inc()
	}
	if len(evict) > 0 {
		l.log.Info("http: session limit reached; closed the least recently used session(s)", "closed", len(evict), "max_sessions", l.max)
	}
	l.pending++
	l.metrics.sessions.Set(float64(len(l.live) + l.pending))
	return true
}

// register ends a reservation: the session the request opened (if any) is
// now live, and is forgotten when it ends (client DELETE, idle timeout,
// eviction).
func (l *sessionLimiter) register(id, user string) {
	var ss *mcp.ServerSession
	if id != "" {
		for s := range l.server.Sessions() {
			if s.ID() == id {
				ss = s
				break
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending--
	defer func() { l.metrics.sessions.Set(float64(len(l.live) + l.pending)) }()
	if ss == nil {
		return
	}
	s := &liveSession{ss: ss, userID: user, lastUsed: time.Now()}
	ctx, end := context.WithCancel(context.Background())
	s.ctx = ctx
	if l.idle > 0 {
		s.timer = time.AfterFunc(l.idle, func() { _ = ss.Close() })
	}
	l.live[id] = s
	go func() {
		_ = ss.Wait()
		end()
		l.mu.Lock()
		if s.timer != nil {
			s.timer.Stop()
		}
		if cur := l.live[id]; cur == s {
			delete(l.live, id)
		}
		l.metrics.sessions.Set(float64(len(l.live) + l.pending))
		l.mu.Unlock()
	}()
}
