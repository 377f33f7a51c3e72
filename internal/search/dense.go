package search

import (
	"container/list"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/embed"
)

// embedBatch is how many documents the background indexer embeds at once.
const embedBatch = 32

// queryCacheSize is how many query embeddings Dense remembers; agents
// repeat searches, and a hit saves the model's few milliseconds.
const queryCacheSize = 512

// Slot states.
const (
	slotFree uint8 = iota
	slotPending
	slotReady
	slotFailed // the model failed on the text; keyword search only
)

// Dense ranks by cosine similarity between the query's embedding and each
// tool's Doc.Text embedding. Documents are embedded in the background, so
// Set never blocks a search; until a document has its vector, Search cannot
// see it and says so with Result.Partial.
//
// Vectors live in one contiguous int8 matrix (a slot per tool, slots
// reused after removal; one scale per vector), a quarter of float32, and
// are scored with a parallel scan of exact integer multiply-adds. The best
// candidates of that first pass (rescoreTop) are then scored exactly from
// their float32 vectors, read back from the embedding cache (or kept in
// memory when there is no cache): on the development set the ranking is
// the float32 one (bench/README.md).
//
// Score scale: the cosine similarity of two L2-normalised vectors, clamped
// to [0, 1].
type Dense struct {
	emb   embed.Embedder
	cache *VecCache
	log   *slog.Logger
	dim   int

	mu    sync.RWMutex
	ids   []string // slot → ID; "" when free
	q8    []int8   // slot s is q8[s*dim : (s+1)*dim], ≈ vector/scale[s]
	scale []float32
	// keys are the slots' cache keys, to read exact vectors back; exact
	// holds them instead (like q8) when there is no cache.
	keys     [][32]byte
	exact    []float32
	state    []uint8
	gen      []uint32 // bumped when a slot is freed, to discard stale jobs
	free     []int32
	slot     map[string]int32
	byServer map[string][]int32
	// queues holds each server's documents waiting for their vector, and
	// turn the servers with a queue, in the order they are served: the
	// worker embeds one batch of a server, then moves on to the next, so
	// a server listing thousands of tools does not hold back a small one
	// listed after it.
	queues  map[string][]job
	turn    []string
	pending int // slots in slotPending
	done    int // embedded since the queue was last empty, for progress
	idle    *sync.Cond

	qmu    sync.Mutex
	qlru   *list.List // of *qentry, most recent first
	qindex map[string]*list.Element

	wake   chan struct{}
	stop   chan struct{}
	exited chan struct{}
}

type job struct {
	slot int32
	gen  uint32
	key  [32]byte
	text string
}

type qentry struct {
	q   string
	vec []float32
}

// NewDense returns a dense index over emb. cache may be nil.
func NewDense(emb embed.Embedder, cache *VecCache, log *slog.Logger) *Dense {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Dense{
		emb: emb, cache: cache, log: log, dim: emb.Dim(),
		slot: map[string]int32{}, byServer: map[string][]int32{}, queues: map[string][]job{},
		qlru: list.New(), qindex: map[string]*list.Element{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), exited: make(chan struct{}),
	}
	d.idle = sync.NewCond(&d.mu)
	go d.worker()
	return d
}

func (d *Dense) Set(_ context.Context, server string, docs []Doc) error {
	type prep struct {
		id     string
		key    [32]byte
		text   string
		cached bool
	}
	model := d.emb.ModelID()
	seen := make(map[string]bool, len(docs))
	prepared := make([]prep, 0, len(docs))
	for _, doc := range docs {
		if seen[doc.ID] {
			continue
		}
		seen[doc.ID] = true
		text := doc.Text()
		prepared = append(prepared, prep{id: doc.ID, key: CacheKey(model, text), text: text})
	}
	// Read cached vectors before taking the lock: searches keep running.
	slab := make([]float32, 0)
	if d.cache != nil {
		slab = make([]float32, len(prepared)*d.dim)
	}
	if d.cache != nil {
		for i := range prepared {
			prepared[i].cached = d.cache.GetInto(prepared[i].key, slab[i*d.dim:(i+1)*d.dim])
		}
	}
	d.mu.Lock()
	d.removeLocked(server)
	slots := make([]int32, len(prepared))
	var queue []job
	for i, p := range prepared {
		s := d.allocLocked(p.id)
		slots[i] = s
		d.keys[s] = p.key
		if p.cached {
			d.storeLocked(s, slab[i*d.dim:(i+1)*d.dim])
			d.state[s] = slotReady
			continue
		}
		d.state[s] = slotPending
		d.pending++
		queue = append(queue, job{slot: s, gen: d.gen[s], key: p.key, text: p.text})
	}
	d.byServer[server] = slots
	if len(queue) > 0 {
		d.queues[server] = queue
		d.turn = append(d.turn, server)
	}
	d.mu.Unlock()
	if len(queue) > 0 {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

func (d *Dense) allocLocked(id string) int32 {
	if old, ok := d.slot[id]; ok {
		// The same ID under another server name cannot happen (IDs are
		// server__tool), but never leave two slots for one ID.
		d.freeLocked(old)
	}
	var s int32
	if n := len(d.free); n > 0 {
		s = d.free[n-1]
		d.free = d.free[:n-1]
	} else {
		s = int32(len(d.ids))
		d.ids = append(d.ids, "")
		d.state = append(d.state, slotFree)
		d.gen = append(d.gen, 0)
		d.q8 = append(d.q8, make([]int8, d.dim)...)
		d.scale = append(d.scale, 0)
		d.keys = append(d.keys, [32]byte{})
		if d.cache == nil {
			d.exact = append(d.exact, make([]float32, d.dim)...)
		}
	}
	d.ids[s] = id
	d.slot[id] = s
	return s
}

// storeLocked sets slot s's vector.
func (d *Dense) storeLocked(s int32, v []float32) {
	off := int(s) * d.dim
	d.scale[s] = quantise(v, d.q8[off:off+d.dim])
	if d.exact != nil {
		copy(d.exact[off:off+d.dim], v)
	}
}

// exactCosLocked is the float32 cosine of q with slot s's vector, false
// when it cannot be read back (a cache write that failed).
func (d *Dense) exactCosLocked(s int32, q, buf []float32) (float32, bool) {
	if d.exact != nil {
		return dot(q, d.exact[int(s)*d.dim:(int(s)+1)*d.dim]), true
	}
	if !d.cache.GetInto(d.keys[s], buf) {
		return 0, false
	}
	return dot(q, buf), true
}

func (d *Dense) freeLocked(s int32) {
	if d.state[s] == slotPending {
		d.pending--
	}
	delete(d.slot, d.ids[s])
	d.ids[s] = ""
	d.state[s] = slotFree
	d.gen[s]++
	d.free = append(d.free, s)
}

func (d *Dense) Remove(server string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.removeLocked(server)
}

func (d *Dense) removeLocked(server string) {
	for _, s := range d.byServer[server] {
		if d.state[s] != slotFree {
			d.freeLocked(s)
		}
	}
	delete(d.byServer, server)
	if _, ok := d.queues[server]; ok {
		delete(d.queues, server)
		d.turn = slices.DeleteFunc(d.turn, func(s string) bool { return s == server })
	}
	if d.pending == 0 {
		d.idle.Broadcast()
	}
}

// Pending is the number of documents waiting for their embedding.
func (d *Dense) Pending() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.pending
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
	for d.pending > 0 && ctx.Err() == nil {
		d.idle.Wait()
	}
	return ctx.Err()
}

// Close stops the background indexer without waiting for the queue: the
// batch being embedded is abandoned and the rest stays pending.
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
	// Close cancels the batch being embedded and drops the queue: shutdown
	// does not wait for thousands of pending tools. What was embedded is in
	// the vector cache already, so the next start resumes from there.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-d.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	var start time.Time
	lastLog := time.Now()
	for {
		if ctx.Err() != nil {
			return
		}
		d.mu.Lock()
		batch := d.nextBatchLocked()
		if len(batch) == 0 {
			d.done = 0
			d.idle.Broadcast()
			d.mu.Unlock()
			start = time.Time{}
			select {
			case <-d.wake:
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
		for i, j := range batch {
			texts[i] = j.text
		}
		vecs, err := d.emb.Embed(ctx, texts)
		if ctx.Err() != nil {
			return // closing: the batch stays pending, like the rest of the queue
		}
		if err == nil && len(vecs) != len(batch) {
			err = fmt.Errorf("model returned %d vectors for %d texts", len(vecs), len(batch))
		}
		if err != nil {
			// The documents stay keyword-only; a model that fails on a
			// text fails the same way on retry.
			d.log.Error("embedding tools failed; they are searchable by keyword only", "tools", len(batch), "error", err)
		}
		// The vectors go to the cache before their slots are ready: a
		// search rescores its best candidates exactly from the cache, so a
		// ready slot must be readable there. A vector cached for a slot
		// removed meanwhile costs nothing (the cache is keyed by content).
		if d.cache != nil && err == nil {
			keys := make([][32]byte, 0, len(batch))
			kept := make([][]float32, 0, len(batch))
			for i, j := range batch {
				if len(vecs[i]) == d.dim {
					keys = append(keys, j.key)
					kept = append(kept, vecs[i])
				}
			}
			if err := d.cache.Put(keys, kept); err != nil {
				d.log.Warn("embedding cache write failed; these tools are ranked by their int8 vectors only", "error", err)
			}
		}
		d.mu.Lock()
		for i, j := range batch {
			if d.gen[j.slot] != j.gen || d.state[j.slot] != slotPending {
				continue
			}
			d.pending--
			if err != nil || len(vecs[i]) != d.dim {
				d.state[j.slot] = slotFailed
				continue
			}
			d.storeLocked(j.slot, vecs[i])
			d.state[j.slot] = slotReady
		}
		d.done += len(batch)
		done, remaining := d.done, d.pending
		if d.pending == 0 {
			d.idle.Broadcast()
		}
		d.mu.Unlock()
		if time.Since(lastLog) > 2*time.Second || (remaining == 0 && done > embedBatch) {
			elapsed := time.Since(start).Seconds()
			rate := float64(done) / max(elapsed, 0.001)
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

// nextBatchLocked takes up to embedBatch documents from the server whose
// turn it is, and moves that server to the back of the line if it has
// more. d.mu is held.
func (d *Dense) nextBatchLocked() []job {
	batch := make([]job, 0, embedBatch)
	for len(batch) == 0 && len(d.turn) > 0 {
		server := d.turn[0]
		d.turn = d.turn[1:]
		q := d.queues[server]
		n := 0
		for n < len(q) && len(batch) < embedBatch {
			j := q[n]
			n++
			// Skip documents replaced or removed since they were queued.
			if d.gen[j.slot] == j.gen && d.state[j.slot] == slotPending {
				batch = append(batch, j)
			}
		}
		if n < len(q) {
			d.queues[server] = q[n:]
			d.turn = append(d.turn, server)
		} else {
			delete(d.queues, server)
		}
	}
	if len(d.turn) == 0 {
		d.turn = nil // let the backing array go
	}
	return batch
}

// queryVec embeds a query, remembering recent ones.
func (d *Dense) queryVec(ctx context.Context, query string) ([]float32, error) {
	d.qmu.Lock()
	if e, ok := d.qindex[query]; ok {
		d.qlru.MoveToFront(e)
		v := e.Value.(*qentry).vec
		d.qmu.Unlock()
		return v, nil
	}
	d.qmu.Unlock()
	qv, err := d.emb.Embed(ctx, []string{query})
	if err != nil {
		return nil, fmt.Errorf("embed query: %w", err)
	}
	if len(qv) != 1 || len(qv[0]) != d.dim {
		return nil, fmt.Errorf("embed query: model returned no %d-dimensional vector", d.dim)
	}
	d.qmu.Lock()
	defer d.qmu.Unlock()
	if _, ok := d.qindex[query]; !ok {
		d.qindex[query] = d.qlru.PushFront(&qentry{q: query, vec: qv[0]})
		if d.qlru.Len() > queryCacheSize {
			last := d.qlru.Back()
			d.qlru.Remove(last)
			delete(d.qindex, last.Value.(*qentry).q)
		}
	}
	return qv[0], nil
}

// parallelMin is the matrix size (floats) above which scoring is split
// across cores.
const parallelMin = 1 << 18

// cosinesLocked writes the first-pass (int8) cosine of q with every
// slot's vector to out (len(out) == len(d.ids)); slots without a vector
// get garbage and must be skipped by state. d.mu is held for reading.
func (d *Dense) cosinesLocked(q []float32, out []float32) {
	qi, qs := quantiseQuery(q)
	n := len(d.ids)
	raw := getI32(n)
	defer putI32(raw)
	scan := func(lo, hi int) {
		dotRowsI8(qi, d.q8[lo*d.dim:hi*d.dim], d.dim, raw[lo:hi])
		for s := lo; s < hi; s++ {
			out[s] = float32(raw[s]) * qs * d.scale[s]
		}
	}
	par := min(runtime.GOMAXPROCS(0), 8)
	if par < 2 || n*d.dim < parallelMin {
		scan(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + par - 1) / par
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			scan(lo, hi)
		}()
	}
	wg.Wait()
}

// rescoreTop is how many first-pass candidates are rescored exactly.
const rescoreTop = 64

// rescoreLocked finds the rescoreTop ready slots with the best score and
// adds w·(exact − first-pass cosine) to their score, the cosines clamped
// as in scores. d.mu is held for reading.
func (d *Dense) rescoreLocked(q []float32, cos, score []float32, w float32) {
	top := make([]int32, 0, rescoreTop+1)
	worse := func(a, b int32) bool { return score[a] < score[b] || score[a] == score[b] && a > b }
	// A min-heap on score of the best slots so far.
	for s := range score {
		if d.state[s] != slotReady {
			continue
		}
		s32 := int32(s)
		if len(top) == rescoreTop && !worse(top[0], s32) {
			continue
		}
		if len(top) == rescoreTop {
			top[0] = s32
		} else {
			top = append(top, s32)
			for i := len(top) - 1; i > 0; {
				p := (i - 1) / 2
				if !worse(top[i], top[p]) {
					break
				}
				top[i], top[p] = top[p], top[i]
				i = p
			}
			continue
		}
		for i := 0; ; {
			l, r, m := 2*i+1, 2*i+2, i
			if l < len(top) && worse(top[l], top[m]) {
				m = l
			}
			if r < len(top) && worse(top[r], top[m]) {
				m = r
			}
			if m == i {
				break
			}
			top[i], top[m] = top[m], top[i]
			i = m
		}
	}
	buf := make([]float32, d.dim)
	for _, s := range top {
		if c, ok := d.exactCosLocked(s, q, buf); ok {
			score[s] += w * float32(clamp01(c)-clamp01(cos[s]))
		}
	}
}

func (d *Dense) noteLocked(res *Result) {
	if d.pending > 0 {
		res.Partial = true
		res.Note = fmt.Sprintf("indexing in progress: %d of %d tools are not embedded yet and are matched by keyword only", d.pending, len(d.slot))
	}
}

func clamp01(x float32) float64 {
	if x < 0 {
		return 0
	}
	if x > 1 {
		return 1
	}
	return float64(x)
}

// Search ranks every embedded document against query.
func (d *Dense) Search(ctx context.Context, query string, limit int, minScore float64) (Result, error) {
	q, err := d.queryVec(ctx, query)
	if err != nil {
		return Result{}, err
	}
	var res Result
	d.mu.RLock()
	cos := getF32(len(d.ids), false)
	defer putF32(cos)
	d.cosinesLocked(q, cos)
	score := getF32(len(cos), false)
	defer putF32(score)
	for s, c := range cos {
		score[s] = float32(clamp01(c))
	}
	d.rescoreLocked(q, cos, score, 1)
	hits := make([]Hit, 0, 64)
	for s, v := range score {
		if d.state[s] == slotReady && float64(v) >= minScore {
			hits = append(hits, Hit{ID: d.ids[s], Score: float64(v)})
		}
	}
	d.noteLocked(&res)
	d.mu.RUnlock()
	res.Hits = TopHits(hits, limit)
	return res, nil
}

// Cosine estimates the cosine of two documents' vectors from their int8
// rows, enough to tell near-duplicates apart from related tools; ok is
// false when either has no vector.
func (d *Dense) Cosine(a, b string) (float64, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	sa, oka := d.slot[a]
	sb, okb := d.slot[b]
	if !oka || !okb || d.state[sa] != slotReady || d.state[sb] != slotReady {
		return 0, false
	}
	ra := d.q8[int(sa)*d.dim : (int(sa)+1)*d.dim]
	qa := make([]int16, d.dim)
	for i, x := range ra {
		qa[i] = int16(x)
	}
	var out [1]int32
	dotRowsI8(qa, d.q8[int(sb)*d.dim:(int(sb)+1)*d.dim], d.dim, out[:])
	return float64(out[0]) * float64(d.scale[sa]) * float64(d.scale[sb]), true
}
