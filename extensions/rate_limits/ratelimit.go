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
	"log/slog"
	"math"
	"time"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/state"
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
	cfg   Config
	emit  func(context.Context, extension.Event)
	log   *slog.Logger
	now   func() time.Time
	store Store
}

// key is the server, or the server and the caller.
func key(c *extension.CallRequest) string {
	if c.Principal == "" {
		return c.ServerName
	}
	return c.ServerName + "\x00" + c.Principal
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
	return &Limiter{cfg: cfg, now: time.Now, store: NewMemoryStore(), log: slog.New(slog.DiscardHandler)}, nil
}

func (*Limiter) ID() string             { return "dev.toolgate/rate_limits" }
func (*Limiter) Phase() extension.Phase { return extension.PhaseAdmit }

// Provision takes the shared store when the gateway has one (state
// backend "redis"), so the limits hold across replicas.
func (l *Limiter) Provision(ctx context.Context, h extension.Host) error {
	l.emit = h.Emit
	if h.Logger != nil {
		l.log = h.Logger
	}
	if b := state.From(ctx); b != nil {
		l.store = NewRedisStore(b)
	}
	return nil
}

func (l *Limiter) WrapCall(next extension.CallHandler) extension.CallHandler {
	return extension.Before(l.check)(next)
}

func (l *Limiter) burstEnabled() bool { return l.cfg.Burst.Enabled == nil || *l.cfg.Burst.Enabled }

// check admits one call or refuses it with a retry-after. The store
// decides both limits in one step, so concurrent calls cannot slip past
// together. A store that cannot decide (shared state unreachable) refuses
// the call: a limit that cannot be checked is not waived.
func (l *Limiter) check(ctx context.Context, c *extension.CallRequest) error {
	lim := l.limit(c.ServerName)
	var d Decision
	var err error
	if cmd, _, ok := state.Prefetched(ctx, l); ok {
		d, err = l.store.(*redisStore).decision(cmd)
	} else {
		d, err = l.store.Take(ctx, key(c), lim, l.now())
	}
	if err != nil {
		l.log.Error("rate limit could not be decided; refusing the call", "server", c.ServerName, "error", err)
		return &extension.Denial{
			Rule:   "rate_limits.state_unavailable",
			Reason: fmt.Sprintf("the rate limit of server %q could not be checked because the shared state store (Redis) is unreachable, so the call was not made; retry shortly", c.ServerName),
			Detail: err.Error(),
			Code:   extension.CodeResourceExhausted,
		}
	}
	switch d.Rule {
	case "burst":
		return l.deny(ctx, c, "rate_limits.burst", fmt.Sprintf("server %q had %d calls in the last %s (burst limit)", c.ServerName, d.Count, time.Duration(l.cfg.Burst.Window)), d.RetryAfter)
	case "calls_per_minute":
		return l.deny(ctx, c, "rate_limits.calls_per_minute", fmt.Sprintf("server %q is limited to %g calls per minute", c.ServerName, lim.Rate*60), d.RetryAfter)
	}
	return nil
}

// PrefetchCall queues the call's decision script with the other filters'
// (state.CallBatch): one Redis round trip for all of them.
func (l *Limiter) PrefetchCall(_ context.Context, c *extension.CallRequest, batch *state.CallBatch) {
	r, ok := l.store.(*redisStore)
	if !ok {
		return
	}
	keys, args := r.script(key(c), l.limit(c.ServerName), l.now())
	batch.Queue(l, nil, r.b, takeScript, keys, args...)
}

// limit is what server's calls are allowed.
func (l *Limiter) limit(server string) Limit {
	lim := Limit{}
	if l.burstEnabled() {
		lim.BurstCalls, lim.BurstWindow = l.cfg.Burst.MaxCalls, time.Duration(l.cfg.Burst.Window)
	}
	rpm, burst := l.cfg.DefaultRPM, l.cfg.DefaultBurst
	if s, ok := l.cfg.PerServer[server]; ok {
		rpm, burst = s.CallsPerMinute, s.Burst
	}
	if rpm > 0 {
		if burst == 0 {
			burst = max(1, int(rpm/6))
		}
		lim.Rate, lim.Burst = rpm/60, burst
	}
	return lim
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
