package gate

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/state"
)

// Redis is a Store shared by gateway replicas: one set per session, which
// expires ttl after the session's last search or call, as the session
// itself does when idle.
type Redis struct {
	b   *state.Backend
	ttl time.Duration
}

// NewRedis returns a Store in b's Redis whose records expire ttl after
// their last use.
func NewRedis(b *state.Backend, ttl time.Duration) *Redis {
	return &Redis{b: b, ttl: ttl}
}

func (r *Redis) key(session string) string { return r.b.Key("gate", session) }

func (r *Redis) Record(ctx context.Context, session string, tools ...string) error {
	if len(tools) == 0 {
		return nil
	}
	k := r.key(session)
	_, err := r.b.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		members := make([]any, len(tools))
		for i, t := range tools {
			members[i] = t
		}
		p.SAdd(ctx, k, members...)
		p.PExpire(ctx, k, r.ttl)
		return nil
	})
	return r.b.Err(err)
}

// hasScript checks a record and, when there is one, keeps it another ttl.
var hasScript = redis.NewScript(`
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0`)

func (r *Redis) Has(ctx context.Context, session, tool string) (bool, error) {
	n, err := hasScript.Run(ctx, r.b.Client, []string{r.key(session)}, tool, r.ttl.Milliseconds()).Int()
	if err != nil {
		return false, r.b.Err(err)
	}
	return n == 1, nil
}

func (r *Redis) Forget(ctx context.Context, session string) error {
	return r.b.Err(r.b.Client.Del(ctx, r.key(session)).Err())
}

// SharedKey returns the discovery-token signing key every replica on b
// uses: the first replica to ask creates it (SET NX), the others read it,
// so a token issued by one is honoured by all.
func SharedKey(ctx context.Context, b *state.Backend) ([]byte, error) {
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	k := b.Key("gate", "key")
	old, err := b.Client.SetArgs(ctx, k, base64.StdEncoding.EncodeToString(fresh), redis.SetArgs{Mode: "NX", Get: true}).Result()
	if errors.Is(err, redis.Nil) {
		return fresh, nil // this replica created it
	}
	if err != nil {
		return nil, fmt.Errorf("gate: signing key: %w", b.Err(err))
	}
	key, err := base64.StdEncoding.DecodeString(old)
	if err != nil || len(key) < 32 {
		return nil, fmt.Errorf("gate: signing key %s in Redis is corrupt (want base64 of 32+ bytes); delete it to make a new one", k)
	}
	return key, nil
}
