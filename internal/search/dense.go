package search

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/embed"
)

// embedBatch is how many documents the background indexer embeds at once.
const embedBatch = 32

// Dense ranks by cosine similarity between the query's embedding and each
// tool's Doc.Text embedding. Documents are embedded in the background, so
// Set never blocks a search; until a document has its vector, Search cannot
// see it and says so with Result.Partial.
//
// Score scale: the cosine similarity of two L2-normalised vectors, clamped
// to [0, 1].
type Dense struct {
	emb   embed.Embedder
	cache *VecCache
	log   *slog.Logger

	mu       sync.RWMutex
	docs     map[string]*denseDoc
	byServer map[string][]string
	queue    []*denseDoc
	done     int // embedded since the queue was last empty, for progress
	idle     *sync.Cond

	wake   chan struct{}
	stop   chan struct{}
	exited chan struct{}
}

type denseDoc struct {
	id   string
	key  [32]byte
	text string
	vec  []float32 // nil until embedded
}

// NewDense returns a dense index over emb. cache may be nil.
func NewDense(emb embed.Embedder, cache *VecCache, log *slog.Logger) *Dense {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Dense{
		emb: emb, cache: cache, log: log,
		docs: map[string]*denseDoc{}, byServer: map[string][]string{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), exited: make(chan struct{}),
	}
	d.idle = sync.NewCond(&d.mu)
	go d.worker()
	return d
}

func (d *Dense) Set(_ context.Context, server string, docs []Doc) error {
	prepared := make([]*denseDoc, len(docs))
	model := d.emb.ModelID()
	for i, doc := range docs {
		text := doc.Text()
		dd := &denseDoc{id: doc.ID, key: CacheKey(model, text), text: text}
		if d.cache != nil {
			dd.vec, _ = d.cache.Get(dd.key)
		}
		prepared[i] = dd
	}
	d.mu.Lock()
	d.removeLocked(server)
	ids := make([]string, len(prepared))
	queued := false
	for i, dd := range prepared {
		d.docs[dd.id] = dd
		ids[i] = dd.id
		if dd.vec == nil {
			d.queue = append(d.queue, dd)
			queued = true
		}
	}
	d.byServer[server] = ids
	d.mu.Unlock()
	if queued {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

func (d *Dense) Remove(server string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.removeLocked(server)
}

func (d *Dense) removeLocked(server string) {
	for _, id := range d.byServer[server] {
		delete(d.docs, id)
	}
	delete(d.byServer, server)
}

// Pending is the number of documents waiting for their embedding.
func (d *Dense) Pending() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return len(d.queue)
}

// Wait blocks until every document set so far has its vector, or ctx ends.
func (d *Dense) Wait(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		d.mu.Lock()
		d.idle.Broadcast()
		d.mu.Unlock()
	})
	defer stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.queue) > 0 && ctx.Err() == nil {
		d.idle.Wait()
	}
	return ctx.Err()
}

// Close stops the background indexer.
func (d *Dense) Close() error {
	select {
	case <-d.stop:
	default:
		close(d.stop)
	}
	<-d.exited
	return nil
}

func (d *Dense) worker() {
	defer close(d.exited)
	var start time.Time
	lastLog := time.Now()
	for {
		d.mu.Lock()
		batch := make([]*denseDoc, 0, embedBatch)
		for len(d.queue) > 0 && len(batch) < embedBatch {
			dd := d.queue[0]
			d.queue = d.queue[1:]
			// Skip documents replaced or removed since they were queued.
			if cur := d.docs[dd.id]; cur == dd && dd.vec == nil {
				batch = append(batch, dd)
			}
		}
		remaining := len(d.queue)
		if len(batch) == 0 {
			d.done = 0
			d.idle.Broadcast()
			d.mu.Unlock()
			select {
			case <-d.wake:
				start = time.Now()
				continue
			case <-d.stop:
				return
			}
		}
		if start.IsZero() {
			start = time.Now()
		}
		d.mu.Unlock()

		texts := make([]string, len(batch))
		for i, dd := range batch {
			texts[i] = dd.text
		}
		vecs, err := d.emb.Embed(context.Background(), texts)
		if err != nil {
			// The documents stay lexical-only; a model that fails on a
			// text fails the same way on retry.
			d.log.Error("embedding tools failed; they are searchable by keyword only", "tools", len(batch), "error", err)
			vecs = nil
		}
		d.mu.Lock()
		keys := make([][32]byte, 0, len(batch))
		kept := make([][]float32, 0, len(batch))
		for i, dd := range batch {
			if vecs == nil {
				continue
			}
			dd.vec = vecs[i]
			keys = append(keys, dd.key)
			kept = append(kept, vecs[i])
		}
		d.done += len(batch)
		done := d.done
		d.mu.Unlock()
		if d.cache != nil && len(keys) > 0 {
			if err := d.cache.Put(keys, kept); err != nil {
				d.log.Warn("embedding cache write failed; vectors are kept in memory", "error", err)
			}
		}
		if time.Since(lastLog) > 2*time.Second || (remaining == 0 && done > embedBatch) {
			elapsed := time.Since(start).Seconds()
			rate := float64(done) / elapsed
			msg := "indexing tools"
			if remaining == 0 {
				msg = "indexing done"
			}
			d.log.Info(msg, "embedded", done, "remaining", remaining, "per_second", fmt.Sprintf("%.0f", rate),
				"eta", (time.Duration(float64(remaining)/max(rate, 0.001)) * time.Second).Round(time.Second).String())
			lastLog = time.Now()
		}
	}
}

// Search ranks every embedded document against query.
func (d *Dense) Search(ctx context.Context, query string, limit int, minScore float64) (Result, error) {
	hits, res, err := d.scores(ctx, query, minScore)
	if err != nil {
		return res, err
	}
	SortHits(hits)
	if limit > 0 && len(hits) > limit {
		hits = hits[:limit]
	}
	res.Hits = hits
	return res, nil
}

// scores returns unsorted hits at or above minScore.
func (d *Dense) scores(ctx context.Context, query string, minScore float64) ([]Hit, Result, error) {
	qv, err := d.emb.Embed(ctx, []string{query})
	if err != nil {
		return nil, Result{}, fmt.Errorf("embed query: %w", err)
	}
	q := qv[0]
	d.mu.RLock()
	defer d.mu.RUnlock()
	hits := make([]Hit, 0, 64)
	for id, dd := range d.docs {
		if dd.vec == nil {
			continue
		}
		s := float64(dot(q, dd.vec))
		if s < 0 {
			s = 0
		} else if s > 1 {
			s = 1
		}
		if s >= minScore {
			hits = append(hits, Hit{ID: id, Score: s})
		}
	}
	var res Result
	if n := len(d.queue); n > 0 {
		res.Partial = true
		res.Note = fmt.Sprintf("indexing in progress: %d of %d tools are not embedded yet and are matched by keyword only", n, len(d.docs))
	}
	return hits, res, nil
}
