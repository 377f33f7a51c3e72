package gateway

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionLimiter bounds the stateful HTTP sessions: anyone who can reach
// the listener can open one with a single initialize request, and each
// costs memory and goroutines until it ends. When a new session would
// exceed the cap, the one unused for longest is closed first; sessions
// being created count too, so a burst cannot overshoot it. Idle sessions
// are closed by the SDK's session timeout.
type sessionLimiter struct {
	server  *mcp.Server
	max     int
	metrics *metrics
	log     *slog.Logger

	mu      sync.Mutex
	pending int                     // sessions being created
	live    map[string]*liveSession // by Mcp-Session-Id
}

type liveSession struct {
	ss       *mcp.ServerSession
	lastUsed time.Time
	active   int // requests in progress
}

func newSessionLimiter(s *mcp.Server, max int, m *metrics, log *slog.Logger) *sessionLimiter {
	return &sessionLimiter{server: s, max: max, metrics: m, log: log, live: map[string]*liveSession{}}
}

func (l *sessionLimiter) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			done := l.use(id)
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
		h.ServeHTTP(w, r)
		l.register(w.Header().Get("Mcp-Session-Id"))
	})
}

// use marks a session as in use until done is called, so an idle session
// is evicted before it.
func (l *sessionLimiter) use(id string) (done func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.live[id]
	if s == nil {
		return func() {}
	}
	s.active++
	s.lastUsed = time.Now()
	return func() {
		l.mu.Lock()
		s.active--
		s.lastUsed = time.Now()
		l.mu.Unlock()
	}
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
func (l *sessionLimiter) register(id string) {
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
	l.pending--
	if ss != nil {
		l.live[id] = &liveSession{ss: ss, lastUsed: time.Now()}
	}
	l.metrics.sessions.Set(float64(len(l.live) + l.pending))
	l.mu.Unlock()
	if ss != nil {
		go func() {
			_ = ss.Wait()
			l.mu.Lock()
			if s := l.live[id]; s != nil && s.ss == ss {
				delete(l.live, id)
			}
			l.metrics.sessions.Set(float64(len(l.live) + l.pending))
			l.mu.Unlock()
		}()
	}
}
