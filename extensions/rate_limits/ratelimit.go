// Package ratelimit is the rate_limits extension: per-server call rates
// (a token bucket: calls per minute with a burst) and a burst detector
// (no more than max_calls within a sliding window). A call over either
// limit is refused with a retry-after the LLM can act on. Limits apply
// per principal when the HTTP frontend authenticates callers, so one
// caller cannot use up another's budget; unauthenticated calls share one.
package ratelimit

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/toolgate/toolgate/extension"
)

// Key is the filters config key.
const Key = "rate_limits"

func init() { extension.Register(Key, FromConfig) }

// New builds the extension from its raw config, decoded strictly.
var New = extension.ConfigFactory(FromConfig)

// Config is the rate_limits object.
type Config struct {
	// DefaultRPM is the calls per minute every server gets (0: no rate
	// limit unless per_server sets one).
	DefaultRPM float64 `json:"default_rpm"`
	// DefaultBurst is the bucket size (default: max(1, rpm/6)).
	DefaultBurst int                     `json:"default_burst"`
	PerServer    map[string]ServerConfig `json:"per_server"`
	Burst        *BurstConfig            `json:"burst"`
}

// ServerConfig overrides the defaults for one server.
type ServerConfig struct {
	CallsPerMinute float64 `json:"calls_per_minute"`
	Burst          int     `json:"burst"`
}

// BurstConfig is the burst detector: at most MaxCalls within Window.
type BurstConfig struct {
	Enabled  *bool    `json:"enabled"`
	MaxCalls int      `json:"max_calls"`
	Window   Duration `json:"window"`
}

// Duration is a time.Duration written as "5s" in JSON.
type Duration time.Duration

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration such as \"5s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return fmt.Errorf("want a positive duration such as \"5s\", got %q", s)
	}
	*d = Duration(v)
	return nil
}

// Defaults of the burst detector.
const (
	DefaultBurstCalls  = 10
	DefaultBurstWindow = 5 * time.Second
)

// Limiter is the extension.
type Limiter struct {
	cfg  Config
	emit func(context.Context, extension.Event)
	now  func() time.Time

	mu sync.Mutex
	// Both maps are keyed by server, or server and principal.
	buckets map[string]*rate.Limiter
	recent  map[string][]time.Time // calls inside the burst window
}

// maxKeys is the number of (server, principal) entries above which idle
// ones (a full bucket, no call in the burst window) are dropped, so that
// many callers over time do not grow the maps without bound.
const maxKeys = 10000

// key is the server, or the server and the caller.
func key(c *extension.CallRequest) string {
	if c.Principal == "" {
		return c.ServerName
	}
	return c.ServerName + "\x00" + c.Principal
}

// prune drops idle entries; l.mu is held.
func (l *Limiter) prune(now time.Time) {
	win := time.Duration(l.cfg.Burst.Window)
	for k, b := range l.buckets {
		if b != nil && b.TokensAt(now) < float64(b.Burst()) {
			continue
		}
		if rec := l.recent[k]; len(rec) > 0 && now.Sub(rec[len(rec)-1]) < win {
			continue
		}
		delete(l.buckets, k)
		delete(l.recent, k)
	}
}

// New decodes the config strictly.
func FromConfig(cfg Config) (extension.Extension, error) {
	if cfg.DefaultRPM < 0 || cfg.DefaultBurst < 0 {
		return nil, fmt.Errorf("default_rpm and default_burst must not be negative")
	}
	for name, s := range cfg.PerServer {
		if s.CallsPerMinute <= 0 || s.Burst < 0 {
			return nil, fmt.Errorf("per_server.%s: calls_per_minute must be positive and burst not negative", name)
		}
	}
	if cfg.Burst == nil {
		cfg.Burst = &BurstConfig{}
	}
	if cfg.Burst.MaxCalls == 0 {
		cfg.Burst.MaxCalls = DefaultBurstCalls
	}
	if cfg.Burst.Window == 0 {
		cfg.Burst.Window = Duration(DefaultBurstWindow)
	}
	if cfg.Burst.MaxCalls < 1 {
		return nil, fmt.Errorf("burst.max_calls must be at least 1")
	}
	return &Limiter{cfg: cfg, now: time.Now, buckets: map[string]*rate.Limiter{}, recent: map[string][]time.Time{}}, nil
}

func (*Limiter) ID() string             { return "dev.toolgate/rate_limits" }
func (*Limiter) Phase() extension.Phase { return extension.PhaseAdmit }
func (l *Limiter) Provision(_ context.Context, h extension.Host) error {
	l.emit = h.Emit
	return nil
}

func (l *Limiter) WrapCall(next extension.CallHandler) extension.CallHandler {
	return extension.Before(l.check)(next)
}

func (l *Limiter) burstEnabled() bool { return l.cfg.Burst.Enabled == nil || *l.cfg.Burst.Enabled }

// check admits one call or refuses it with a retry-after. Both limits are
// decided under one lock, so concurrent calls cannot slip past together.
func (l *Limiter) check(ctx context.Context, c *extension.CallRequest) error {
	now := l.now()
	k := key(c)
	l.mu.Lock()
	if len(l.buckets) > maxKeys || len(l.recent) > maxKeys {
		l.prune(now)
	}
	var rec []time.Time
	if l.burstEnabled() {
		win := time.Duration(l.cfg.Burst.Window)
		rec = l.recent[k]
		i := 0
		for i < len(rec) && now.Sub(rec[i]) >= win {
			i++
		}
		rec = rec[i:]
		if len(rec) >= l.cfg.Burst.MaxCalls {
			retry := win - now.Sub(rec[0])
			l.recent[k] = rec
			l.mu.Unlock()
			return l.deny(ctx, c, "rate_limits.burst", fmt.Sprintf("server %q had %d calls in the last %s (burst limit)", c.ServerName, len(rec), win), retry)
		}
	}
	b := l.bucket(k, c.ServerName)
	if b != nil {
		r := b.ReserveN(now, 1)
		if d := r.DelayFrom(now); !r.OK() || d > 0 {
			r.CancelAt(now)
			l.mu.Unlock()
			return l.deny(ctx, c, "rate_limits.calls_per_minute", fmt.Sprintf("server %q is limited to %g calls per minute", c.ServerName, float64(b.Limit())*60), d)
		}
	}
	if l.burstEnabled() {
		l.recent[k] = append(rec, now)
	}
	l.mu.Unlock()
	return nil
}

// bucket returns the token bucket of key k (of server), or nil when the
// server has no rate.
func (l *Limiter) bucket(k, server string) *rate.Limiter {
	if b, ok := l.buckets[k]; ok {
		return b
	}
	rpm, burst := l.cfg.DefaultRPM, l.cfg.DefaultBurst
	if s, ok := l.cfg.PerServer[server]; ok {
		rpm, burst = s.CallsPerMinute, s.Burst
	}
	var b *rate.Limiter
	if rpm > 0 {
		if burst == 0 {
			burst = max(1, int(rpm/6))
		}
		b = rate.NewLimiter(rate.Limit(rpm/60), burst)
	}
	l.buckets[k] = b
	return b
}

func (l *Limiter) deny(_ context.Context, c *extension.CallRequest, rule, why string, retry time.Duration) error {
	// The gateway records the refusal as tool_call_intercepted.
	secs := math.Max(0.1, math.Ceil(retry.Seconds()*10)/10)
	return &extension.Denial{
		Rule:   rule,
		Reason: fmt.Sprintf("%s; retry after %.1f s", why, secs),
		Code:   extension.CodeResourceExhausted,
	}
}
