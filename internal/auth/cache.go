package auth

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/toolgate/toolgate/extension"
)

const (
	// cacheSize bounds the verified-token cache.
	cacheSize = 4096
	// cacheTTL bounds how long a verified token is trusted without its
	// signature being checked again, so that a key the provider withdraws
	// stops working within it even for tokens seen before.
	cacheTTL = 5 * time.Minute
)

// tokenCache remembers tokens whose signature and claims were verified,
// by their SHA-256, so a client sending the same access token on every
// request pays for the signature check (tens of microseconds for RSA or
// ECDSA) once. An entry is used only until the token's exp (plus
// Leeway) and at most cacheTTL after it was verified.
type tokenCache struct {
	mu sync.RWMutex
	m  map[[sha256.Size]byte]cached
}

type cached struct {
	p     *extension.Principal
	until time.Time
}

func newTokenCache() *tokenCache {
	return &tokenCache{m: make(map[[sha256.Size]byte]cached)}
}

func (c *tokenCache) get(key [sha256.Size]byte, now time.Time) *extension.Principal {
	c.mu.RLock()
	e, ok := c.m[key]
	c.mu.RUnlock()
	if !ok || now.After(e.until) {
		return nil
	}
	return e.p
}

func (c *tokenCache) put(key [sha256.Size]byte, p *extension.Principal, now time.Time, ttl time.Duration) {
	until := now.Add(ttl)
	if e := Expiry(p); !e.IsZero() && e.Add(Leeway).Before(until) {
		until = e.Add(Leeway)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= cacheSize {
		for k, e := range c.m {
			if now.After(e.until) {
				delete(c.m, k)
			}
		}
		// Still full: drop an arbitrary half (map order is random).
		for k := range c.m {
			if len(c.m) < cacheSize/2 {
				break
			}
			delete(c.m, k)
		}
	}
	c.m[key] = cached{p: p, until: until}
}
