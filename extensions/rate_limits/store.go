package ratelimit

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/toolgate/toolgate/internal/state"
)

// Limit is what one key (a server, or a server and a principal) is
// allowed: a token bucket of Rate calls per second holding Burst, and at
// most BurstCalls calls within BurstWindow. A zero Rate or BurstCalls
// turns that check off.
type Limit struct {
	Rate        float64
	Burst       int
	BurstCalls  int
	BurstWindow time.Duration
}

// Decision is a Store's answer for one call. Rule is "" when the call is
// admitted (and counted), else "burst" or "calls_per_minute"; a refused
// call is not counted.
type Decision struct {
	Rule string
	// Count is the number of calls in the burst window (rule "burst").
	Count      int
	RetryAfter time.Duration
}

// Store decides and counts calls. Take checks both limits and counts the
// call only when it passes both, as one atomic step, so concurrent calls
// (on any replica sharing the store) cannot slip past together.
type Store interface {
	Take(ctx context.Context, key string, lim Limit, now time.Time) (Decision, error)
}

// memoryStore is the in-process Store.
type memoryStore struct {
	mu sync.Mutex
	// Both maps are keyed by server, or server and principal.
	buckets map[string]*rate.Limiter
	recent  map[string][]time.Time // calls inside the burst window
	window  time.Duration          // the longest burst window seen, for prune
}

// NewMemoryStore returns an empty in-process Store.
func NewMemoryStore() Store {
	return &memoryStore{buckets: map[string]*rate.Limiter{}, recent: map[string][]time.Time{}}
}

// maxKeys is the number of keys above which idle ones (a full bucket, no
// call in the burst window) are dropped, so that many callers over time
// do not grow the maps without bound.
const maxKeys = 10000

// prune drops idle entries; m.mu is held.
func (m *memoryStore) prune(now time.Time) {
	for k, b := range m.buckets {
		if b != nil && b.TokensAt(now) < float64(b.Burst()) {
			continue
		}
		if rec := m.recent[k]; len(rec) > 0 && now.Sub(rec[len(rec)-1]) < m.window {
			continue
		}
		delete(m.buckets, k)
		delete(m.recent, k)
	}
}

func (m *memoryStore) Take(_ context.Context, k string, lim Limit, now time.Time) (Decision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.window = max(m.window, lim.BurstWindow)
	if len(m.buckets) > maxKeys || len(m.recent) > maxKeys {
		m.prune(now)
	}
	var rec []time.Time
	if lim.BurstCalls > 0 {
		win := lim.BurstWindow
		rec = m.recent[k]
		i := 0
		for i < len(rec) && now.Sub(rec[i]) >= win {
			i++
		}
		rec = rec[i:]
		if len(rec) >= lim.BurstCalls {
			m.recent[k] = rec
			return Decision{Rule: "burst", Count: len(rec), RetryAfter: win - now.Sub(rec[0])}, nil
		}
	}
	b, ok := m.buckets[k]
	if !ok {
		if lim.Rate > 0 {
			b = rate.NewLimiter(rate.Limit(lim.Rate), lim.Burst)
		}
		m.buckets[k] = b
	}
	if b != nil {
		r := b.ReserveN(now, 1)
		if d := r.DelayFrom(now); !r.OK() || d > 0 {
			r.CancelAt(now)
			return Decision{Rule: "calls_per_minute", RetryAfter: d}, nil
		}
	}
	if lim.BurstCalls > 0 {
		m.recent[k] = append(rec, now)
	}
	return Decision{}, nil
}

// takeScript is Take in Redis: the burst detector as a sorted set of call
// times, the token bucket as GCRA (one theoretical arrival time per key),
// checked and counted in one script, so replicas share one limit.
//
//go:embed take.lua
var takeLua string

var takeScript = redis.NewScript(takeLua)

// redisStore is the Store shared by replicas through Redis.
type redisStore struct {
	b   *state.Backend
	seq atomic.Uint64 // makes burst-set members unique within this replica
}

// NewRedisStore returns a Store in b's Redis.
func NewRedisStore(b *state.Backend) Store { return &redisStore{b: b} }

func (r *redisStore) Take(ctx context.Context, k string, lim Limit, now time.Time) (Decision, error) {
	keys, args := r.script(k, lim, now)
	return r.decision(takeScript.Run(ctx, r.b.Client, keys, args...))
}

// script is the keys and arguments of takeScript for one call.
func (r *redisStore) script(k string, lim Limit, now time.Time) ([]string, []any) {
	us := now.UnixMicro()
	interval := int64(0)
	if lim.Rate > 0 {
		interval = int64(math.Round(1e6 / lim.Rate))
	}
	member := strconv.FormatInt(us, 36) + "-" + r.b.Replica() + "-" + strconv.FormatUint(r.seq.Add(1), 36)
	return []string{r.b.Key("rl", k, "gcra"), r.b.Key("rl", k, "burst")},
		[]any{us, interval, lim.Burst, lim.BurstCalls, lim.BurstWindow.Microseconds(), member}
}

// decision reads takeScript's answer.
func (r *redisStore) decision(cmd *redis.Cmd) (Decision, error) {
	res, err := cmd.Int64Slice()
	if err != nil {
		return Decision{}, r.b.Err(err)
	}
	if len(res) != 3 {
		return Decision{}, fmt.Errorf("rate_limits: unexpected answer %v from Redis", res)
	}
	d := Decision{Count: int(res[1]), RetryAfter: time.Duration(res[2]) * time.Microsecond}
	switch res[0] {
	case 1:
		d.Rule = "burst"
	case 2:
		d.Rule = "calls_per_minute"
	}
	return d, nil
}
