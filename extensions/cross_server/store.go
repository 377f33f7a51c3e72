package flow

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/state"
)

// ReadRecord is a call that read data from a server: the session's latest from
// that server.
type ReadRecord struct {
	At     time.Time
	Server string
	// Tool is the qualified name of the call.
	Tool string
}

// Step is one call, as the store sees it.
type Step struct {
	Server string
	Tool   string // qualified name, kept with a read
	At     time.Time
	// Source: the call reads data, so it is recorded as the session's
	// read of Server unless it is refused.
	Source bool
	// BlockWithin: another server's read younger than this refuses the
	// call (0: no rule refuses it).
	BlockWithin time.Duration
	// Keep: reads older than this are forgotten.
	Keep time.Duration
}

// Store holds each session's recent reads. Step is the whole decision's
// state access in one atomic step: it finds the newest read from another
// server within Keep and, when the call is a source and that read does
// not refuse it, records the call, so two concurrent calls of one session
// (on one replica or on two sharing the store) cannot both slip past.
type Store interface {
	Step(ctx context.Context, session string, s Step) (ReadRecord, bool, error)
}

// memoryStore is the in-process Store.
type memoryStore struct {
	mu       sync.Mutex
	sessions map[string]*session
	sweepAt  int // map size at which idle sessions are dropped
}

type session struct {
	mu    sync.Mutex
	reads []ReadRecord // at most one per server, the latest, oldest first
	// dead marks a session dropped from the map by a sweep; a call that
	// holds it takes the map's current one instead.
	dead bool
}

// minSweep is the number of sessions below which none is dropped.
const minSweep = 1024

// NewMemoryStore returns an empty in-process Store.
func NewMemoryStore() Store { return &memoryStore{sessions: map[string]*session{}} }

// session returns key's session, locked. Sessions with no read inside
// keep are dropped once the map grows past sweepAt, so the map holds the
// sessions that matter, not every session ever seen.
func (m *memoryStore) session(key string, now time.Time, keep time.Duration) *session {
	for {
		m.mu.Lock()
		if len(m.sessions) >= max(m.sweepAt, minSweep) {
			for k, s := range m.sessions {
				if k != key && s.mu.TryLock() {
					if n := len(s.reads); n == 0 || now.Sub(s.reads[n-1].At) >= keep {
						s.dead = true
						delete(m.sessions, k)
					}
					s.mu.Unlock()
				}
			}
			m.sweepAt = 2 * len(m.sessions)
		}
		s := m.sessions[key]
		if s == nil {
			s = &session{}
			m.sessions[key] = s
		}
		m.mu.Unlock()
		s.mu.Lock()
		if !s.dead {
			return s
		}
		s.mu.Unlock()
	}
}

func (m *memoryStore) Step(_ context.Context, key string, st Step) (ReadRecord, bool, error) {
	s := m.session(key, st.At, st.Keep)
	defer s.mu.Unlock()
	i := 0
	for i < len(s.reads) && st.At.Sub(s.reads[i].At) >= st.Keep {
		i++
	}
	s.reads = s.reads[i:]
	var found ReadRecord
	ok := false
	for i := len(s.reads) - 1; i >= 0; i-- {
		if r := s.reads[i]; r.Server != st.Server {
			found, ok = r, true
			break
		}
	}
	if st.Source && !(ok && st.At.Sub(found.At) < st.BlockWithin) {
		s.reads = slices.DeleteFunc(s.reads, func(r ReadRecord) bool { return r.Server == st.Server })
		s.reads = append(s.reads, ReadRecord{At: st.At, Server: st.Server, Tool: st.Tool})
	}
	return found, ok, nil
}

// stepScript is Step in Redis: a session's reads are a hash, server →
// "time|tool", expiring Keep after the last read.
var stepScript = redis.NewScript(`
local now = tonumber(ARGV[1])
local server, tool = ARGV[2], ARGV[3]
local source = ARGV[4] == '1'
local block, keep = tonumber(ARGV[5]), tonumber(ARGV[6])
local all = redis.call('HGETALL', KEYS[1])
local bestAt, bestServer, bestTool = -1, '', ''
for i = 1, #all, 2 do
  local v = all[i + 1]
  local sep = string.find(v, '|', 1, true)
  local at = tonumber(string.sub(v, 1, sep - 1))
  if now - at >= keep then
    redis.call('HDEL', KEYS[1], all[i])
  elseif all[i] ~= server and at > bestAt then
    bestAt, bestServer, bestTool = at, all[i], string.sub(v, sep + 1)
  end
end
if source and not (bestAt >= 0 and now - bestAt < block) then
  redis.call('HSET', KEYS[1], server, string.format('%.0f', now) .. '|' .. tool)
  redis.call('PEXPIRE', KEYS[1], math.ceil(keep / 1000) + 1)
end
if bestAt < 0 then return {} end
return {string.format('%.0f', bestAt), bestServer, bestTool}
`)

// redisStore is the Store shared by replicas through Redis.
type redisStore struct{ b *state.Backend }

// NewRedisStore returns a Store in b's Redis.
func NewRedisStore(b *state.Backend) Store { return &redisStore{b: b} }

func (r *redisStore) Step(ctx context.Context, key string, st Step) (ReadRecord, bool, error) {
	keys, args := r.script(key, st)
	return r.result(stepScript.Run(ctx, r.b.Client, keys, args...))
}

// script is the keys and arguments of stepScript for one call.
func (r *redisStore) script(key string, st Step) ([]string, []any) {
	src := "0"
	if st.Source {
		src = "1"
	}
	return []string{r.b.Key("flow", key)},
		[]any{st.At.UnixMicro(), st.Server, st.Tool, src, st.BlockWithin.Microseconds(), st.Keep.Microseconds()}
}

// result reads stepScript's answer.
func (r *redisStore) result(cmd *redis.Cmd) (ReadRecord, bool, error) {
	res, err := cmd.StringSlice()
	if err != nil {
		return ReadRecord{}, false, r.b.Err(err)
	}
	if len(res) != 3 {
		return ReadRecord{}, false, nil
	}
	us, err := strconv.ParseInt(res[0], 10, 64)
	if err != nil {
		return ReadRecord{}, false, fmt.Errorf("flow: bad read time %q in Redis", res[0])
	}
	return ReadRecord{At: time.UnixMicro(us), Server: res[1], Tool: res[2]}, true, nil
}
