package state

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Bounds of the audit mirror: the stream keeps about this many records
// (the oldest are trimmed), and at most queueMax records wait for Redis
// in a replica (while Redis is away; the rest are dropped from the
// mirror, never from the replica's own log).
const (
	streamMax = 1_000_000
	queueMax  = 10_000
	batchMax  = 256
)

// AuditStream mirrors a replica's audit records into one Redis Stream that
// every replica appends to, for a merged, ordered view of all of them.
// The replica's own hash-chained log stays the record of truth: the mirror
// is written after the record is in the log and never holds up a call.
type AuditStream struct {
	b    *Backend
	ch   chan []byte
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	dropped int64
}

// AuditStreamKey is the stream's key.
func (b *Backend) AuditStreamKey() string { return b.Key("audit") }

// StartAuditStream starts mirroring; Close stops it.
func (b *Backend) StartAuditStream() *AuditStream {
	s := &AuditStream{b: b, ch: make(chan []byte, queueMax), done: make(chan struct{})}
	go s.run()
	return s
}

// Push queues one record line; it never blocks (a full queue drops it from
// the mirror and counts it).
func (s *AuditStream) Push(line []byte) {
	select {
	case s.ch <- line:
	default:
		s.mu.Lock()
		s.dropped++
		n := s.dropped
		s.mu.Unlock()
		if n == 1 || n%1000 == 0 {
			s.b.log.Warn("audit mirror: Redis is behind; records dropped from the shared stream (each replica's own log keeps them)", "dropped", n)
		}
	}
}

// Close sends what is queued (for at most 2 s) and stops.
func (s *AuditStream) Close() {
	s.once.Do(func() { close(s.ch) })
	select {
	case <-s.done:
	case <-time.After(2 * time.Second):
	}
}

func (s *AuditStream) run() {
	defer close(s.done)
	ctx := context.Background()
	backoff := 50 * time.Millisecond
	var batch [][]byte
	for {
		if len(batch) == 0 {
			line, ok := <-s.ch
			if !ok {
				return
			}
			batch = append(batch, line)
		}
	fill:
		for len(batch) < batchMax {
			select {
			case line, ok := <-s.ch:
				if !ok {
					break fill
				}
				batch = append(batch, line)
			default:
				break fill
			}
		}
		_, err := s.b.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, line := range batch {
				p.XAdd(ctx, &redis.XAddArgs{Stream: s.b.AuditStreamKey(), MaxLen: streamMax, Approx: true,
					Values: []any{"r", s.b.replica, "l", line}})
			}
			return nil
		})
		if err == nil {
			batch, backoff = batch[:0], 50*time.Millisecond
			continue
		}
		s.b.log.Warn("audit mirror: cannot reach Redis; retrying", "error", err, "queued", len(batch)+len(s.ch))
		time.Sleep(backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
}

// ReadAuditStream calls fn with every record of the merged stream, oldest
// first: the replica that wrote it and its line.
func ReadAuditStream(ctx context.Context, b *Backend, fn func(replica string, line []byte) error) error {
	start := "-"
	for {
		msgs, err := b.Client.XRangeN(ctx, b.AuditStreamKey(), start, "+", 1000).Result()
		if err != nil {
			return b.Err(err)
		}
		for _, m := range msgs {
			r, _ := m.Values["r"].(string)
			l, _ := m.Values["l"].(string)
			if l == "" {
				return errors.New("audit stream: entry " + m.ID + " has no record")
			}
			if err := fn(r, []byte(l)); err != nil {
				return err
			}
		}
		if len(msgs) < 1000 {
			return nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}
