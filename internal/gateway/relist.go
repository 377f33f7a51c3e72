package gateway

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// relistDebounce is how long a re-list waits after the notification that
// asked for it, so a burst of notifications costs one listing.
const relistDebounce = 200 * time.Millisecond

// coalescer turns a server's notifications/tools/list_changed into
// re-lists: at most one runs at a time; notifications arriving while one
// is waiting or running cause exactly one more after it; and the re-lists
// themselves are rate-limited by a token bucket, so an upstream that
// floods notifications costs a bounded number of listings (and audit
// records) per minute. Notifications beyond the rate are never lost: they
// are folded into the next re-list, which reflects the server's latest
// list.
type coalescer struct {
	lim      *rate.Limiter
	debounce time.Duration
	// onLimited is called once, the first time the rate delays a re-list.
	onLimited func()

	mu      sync.Mutex
	running bool // a re-list is waiting or running
	again   bool // a notification arrived after the running one started
	limited bool
}

func newCoalescer(perMinute, burst int, onLimited func()) *coalescer {
	return &coalescer{
		lim:       rate.NewLimiter(rate.Every(time.Minute/time.Duration(max(perMinute, 1))), max(burst, 1)),
		debounce:  relistDebounce,
		onLimited: onLimited,
	}
}

// notify asks for a re-list. The first caller runs fn (after the debounce
// and the rate limit) and returns when no more are due; the others return
// at once. It gives up when ctx ends.
func (c *coalescer) notify(ctx context.Context, fn func()) {
	c.mu.Lock()
	if c.running {
		c.again = true
		c.mu.Unlock()
		return
	}
	c.running = true
	c.mu.Unlock()
	stop := func() {
		c.mu.Lock()
		c.running, c.again = false, false
		c.mu.Unlock()
	}
	for {
		if !sleep(ctx, c.debounce) {
			stop()
			return
		}
		r := c.lim.Reserve()
		if d := r.Delay(); d > 0 {
			c.mu.Lock()
			first := !c.limited
			c.limited = true
			c.mu.Unlock()
			if first && c.onLimited != nil {
				c.onLimited()
			}
			if !sleep(ctx, d) {
				r.Cancel()
				stop()
				return
			}
		}
		// Notifications up to here are answered by this listing.
		c.mu.Lock()
		c.again = false
		c.mu.Unlock()
		fn()
		c.mu.Lock()
		again := c.again
		if !again {
			c.running = false
		}
		c.mu.Unlock()
		if !again {
			return
		}
	}
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
