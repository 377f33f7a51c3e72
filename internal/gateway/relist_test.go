package gateway

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A burst of notifications costs one re-list.
func TestCoalescerBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCoalescer(6, 3, nil)
		var runs atomic.Int32
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() { c.notify(t.Context(), func() { runs.Add(1) }) })
		}
		wg.Wait()
		if n := runs.Load(); n != 1 {
			t.Fatalf("50 notifications at once caused %d re-lists, want 1", n)
		}
	})
}

// Notifications during a re-list cause exactly one more, which starts
// after the running one ends.
func TestCoalescerOneMoreAfterRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCoalescer(6, 3, nil)
		var runs, running atomic.Int32
		release := make(chan struct{})
		fn := func() {
			if running.Add(1) != 1 {
				t.Error("two re-lists ran at once")
			}
			if runs.Add(1) == 1 {
				<-release
			}
			running.Add(-1)
		}
		done := make(chan struct{})
		go func() { c.notify(t.Context(), fn); close(done) }()
		time.Sleep(time.Second) // past the debounce: the first re-list is running
		synctest.Wait()
		if runs.Load() != 1 {
			t.Fatal("the first re-list is not running")
		}
		for range 20 {
			go c.notify(t.Context(), fn)
		}
		synctest.Wait()
		close(release)
		<-done
		if n := runs.Load(); n != 2 {
			t.Fatalf("20 notifications during a re-list caused %d re-lists in all, want 2", n)
		}
		// Quiet again: the next notification re-lists.
		c.notify(t.Context(), fn)
		if n := runs.Load(); n != 3 {
			t.Fatalf("a later notification made %d re-lists in all, want 3", n)
		}
	})
}

// A sustained flood is re-listed at the configured rate: the burst, then
// one per minute/perMinute, with one warning.
func TestCoalescerRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		warnings := 0
		c := newCoalescer(6, 3, func() { warnings++ })
		var runs atomic.Int32
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		// A notification every 100 ms for one minute.
		start := time.Now()
		for time.Since(start) < time.Minute {
			wg.Go(func() { c.notify(ctx, func() { runs.Add(1) }) })
			time.Sleep(100 * time.Millisecond)
		}
		// 3 at once, then one every 10 s: 3 + 6 in the minute, give or
		// take the one waiting at its end.
		if n := runs.Load(); n < 8 || n > 10 {
			t.Errorf("600 notifications over a minute caused %d re-lists, want 3 + 6 (±1)", n)
		}
		if warnings != 1 {
			t.Errorf("%d warnings, want 1", warnings)
		}
		cancel()
		wg.Wait()
	})
}

// Closing the gateway (ctx) ends a re-list waiting for its turn.
func TestCoalescerStopsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCoalescer(1, 1, nil)
		runs := 0
		c.notify(t.Context(), func() { runs++ })
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { c.notify(ctx, func() { runs++ }); close(done) }()
		synctest.Wait()
		cancel()
		<-done
		if runs != 1 {
			t.Fatalf("runs = %d, want 1 (the second was waiting for the rate limit)", runs)
		}
	})
}
