package llmproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// streamer relays one SSE response. Events that are not part of a tool
// call are written and flushed as they arrive; the events of a tool call
// are held (within max_body_bytes) until the call is complete, then judged
// with its full arguments and either released as they came or replaced
// by a text block saying why the call was blocked. Nothing of a call that
// was not judged (the stream broke off) reaches the agent.
type streamer struct {
	p        *Proxy
	ctx      context.Context
	w        http.ResponseWriter
	provider string
	info     *requestInfo
	werr     error
	held     int // bytes held
	in       *sseReader
	dirty    bool // written, not yet flushed
}

func (p *Proxy) stream(ctx context.Context, w http.ResponseWriter, body io.Reader, provider, api string, info *requestInfo) {
	r := newSSEReader(body, p.cfg.EventLimit())
	s := &streamer{p: p, ctx: ctx, w: w, provider: provider, info: info, in: r}
	var h interface {
		event(e event) error
		end()
	}
	switch api {
	case apiMessages:
		h = &anthropicStream{s: s}
	case apiChat:
		h = &chatStream{s: s, pending: map[int]*chatChoice{}}
	default:
		h = &responsesStream{s: s, decided: map[string]Decision{}, open: map[int]*respCall{}, blocked: map[int]*respCall{}}
	}
	for {
		if s.dirty && !r.eventBuffered() {
			s.flushNow()
		}
		e, err := r.next()
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				p.log.Warn("stream from the provider ended with an error; held tool calls are dropped", "provider", provider, "error", err)
			}
			h.end()
			s.flushNow()
			return
		}
		if err := h.event(e); err != nil {
			if ctx.Err() == nil && s.werr == nil {
				p.log.Warn("stream rewriting stopped; held tool calls are dropped", "provider", provider, "error", err)
			}
			s.flushNow()
			return
		}
		if s.werr != nil {
			return // the client went away
		}
	}
}

func (s *streamer) write(b []byte) {
	if s.werr != nil {
		return
	}
	_, s.werr = s.w.Write(b)
}

// flush marks what was written to be sent: the stream loop sends it
// before it would wait for the provider, so nothing waits, but a burst of
// events that arrived together costs one write instead of one each.
func (s *streamer) flush() { s.dirty = true }

// eventBuffered reports whether a whole next event has already arrived.
func (s *sseReader) eventBuffered() bool {
	n := s.r.Buffered()
	if n == 0 {
		return false
	}
	b, _ := s.r.Peek(n)
	return bytes.Contains(b, blankLine) || bytes.Contains(b, blankLineCRLF)
}

var (
	blankLine     = []byte("\n\n")
	blankLineCRLF = []byte("\r\n\r\n")
)

func (s *streamer) flushNow() {
	s.dirty = false
	if s.werr == nil {
		flush(s.w)
	}
}

var errHeldTooLarge = errors.New("a tool call's events exceed max_body_bytes")

func (s *streamer) hold(n int) error {
	s.held += n
	if int64(s.held) > s.p.cfg.BodyLimit() {
		return errHeldTooLarge
	}
	return nil
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// anthropicStream follows the Messages stream: message_start, then per
// content block content_block_start / _delta... / _stop (blocks come one
// at a time), then message_delta (stop_reason) and message_stop.
type anthropicStream struct {
	s *streamer
	// the tool_use block being held
	holding    bool
	index      int
	id, name   string
	args       bytes.Buffer
	events     [][]byte
	uses, hits int
}

// Every decision reads JSON by exact key (obj), the way the SDKs'
// JSON.parse does: encoding/json's struct decoding matches keys ignoring
// case, so {"name":"send_email","Name":"x"} would read as "x" here and as
// send_email in the agent.

var (
	toolUse       = []byte("tool_use")
	messageDelta  = []byte("message_delta")
	unicodeEscape = []byte(`\u`)
)

func (a *anthropicStream) event(e event) error {
	s := a.s
	// Only events that may start a block, belong to a held one or end
	// the message are decoded; an escaped key (\u) could hide any of them
	// from the byte checks, so such events are decoded too.
	if !a.holding && !bytes.Contains(e.data, toolUse) && !(a.hits > 0 && bytes.Contains(e.data, messageDelta)) && !bytes.Contains(e.data, unicodeEscape) {
		s.write(e.raw)
		s.flush()
		return nil
	}
	var ev obj
	if len(e.data) > 0 {
		if err := json.Unmarshal(e.data, &ev); err != nil {
			return err
		}
	}
	typ := str(ev, "type")
	var idx int
	_ = json.Unmarshal(ev["index"], &idx)
	switch {
	case typ == "message_start":
		// The message's content becomes the client's snapshot: a tool_use
		// in it is judged like one in a buffered response.
		var m obj
		if json.Unmarshal(ev["message"], &m) == nil {
			uses, hits, changed := s.p.judgeContent(s.ctx, s.provider, s.info, m)
			a.uses, a.hits = a.uses+uses, a.hits+hits
			if changed {
				ev["message"] = mustJSON(m)
				s.write(formatEvent(e.name, mustJSON(ev)))
				s.flush()
				return nil
			}
		}
	case typ == "content_block_start":
		var cb obj
		_ = json.Unmarshal(ev["content_block"], &cb)
		if str(cb, "type") != "tool_use" {
			break
		}
		if a.holding {
			return errors.New("a tool_use block started inside another")
		}
		a.holding, a.index, a.id, a.name = true, idx, str(cb, "id"), str(cb, "name")
		a.args.Reset()
		a.events = append(a.events[:0], clone(e.raw))
		a.uses++
		return s.hold(len(e.raw))
	case a.holding && typ == "content_block_delta" && idx == a.index:
		var delta obj
		_ = json.Unmarshal(ev["delta"], &delta)
		if str(delta, "type") == "input_json_delta" {
			a.args.WriteString(str(delta, "partial_json"))
		}
		a.events = append(a.events, clone(e.raw))
		return s.hold(len(e.raw) + a.args.Len())
	case a.holding && typ == "content_block_stop" && idx == a.index:
		// The call is complete.
		a.holding = false
		s.held = 0
		args := a.args.Bytes()
		if len(bytes.TrimSpace(args)) == 0 {
			args = []byte("{}")
		}
		d := s.p.evaluate(s.ctx, s.provider, s.info, a.id, a.name, args)
		if d.Action != Block {
			for _, b := range a.events {
				s.write(b)
			}
			s.write(e.raw)
		} else {
			a.hits++
			s.write(formatEvent("content_block_start", mustJSON(map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "text", "text": ""}})))
			s.write(formatEvent("content_block_delta", mustJSON(map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": blockedText(a.name, d)}})))
			s.write(formatEvent("content_block_stop", mustJSON(map[string]any{"type": "content_block_stop", "index": idx})))
		}
		a.events = a.events[:0]
		s.flush()
		return nil
	case typ == "message_delta" && !a.holding && a.hits > 0 && a.hits == a.uses:
		// Every tool call was blocked: the turn ends here.
		var delta obj
		if json.Unmarshal(ev["delta"], &delta) == nil && str(delta, "stop_reason") == "tool_use" {
			delta["stop_reason"] = mustJSON("end_turn")
			ev["delta"] = mustJSON(delta)
			s.write(formatEvent(e.name, mustJSON(ev)))
			s.flush()
			return nil
		}
	}
	if a.holding {
		// Any other event inside a held block (ping) keeps its place.
		a.events = append(a.events, clone(e.raw))
		return s.hold(len(e.raw))
	}
	s.write(e.raw)
	s.flush()
	return nil
}

func (a *anthropicStream) end() {}

// chatStream follows Chat Completions chunks. A choice's chunks are held
// from its first tool_calls delta to its finish_reason; then its calls are
// judged, the held chunks are released without the blocked calls (the
// others renumbered so their indices stay consecutive), the blocked calls'
// lines are sent as content, and finish_reason becomes stop if no call is
// left.
type chatStream struct {
	s       *streamer
	pending map[int]*chatChoice
}

type chatChoice struct {
	chunks []heldChunk // each carrying only this choice
	calls  []*chatCall
	byIdx  map[int]*chatCall
}

// heldChunk is a chunk's JSON with this choice only, and its raw event
// when the chunk had no other choice (so it can go out as it came).
type heldChunk struct {
	raw, data []byte
}

type chatCall struct {
	index    int
	id, name string
	// whole is every name fragment joined: a name split over chunks is
	// the last fragment to the JS SDK, the concatenation to the Python
	// one; both are judged.
	whole string
	args  bytes.Buffer
}

var (
	toolCallsKey    = []byte(`"tool_calls"`)
	functionCallKey = []byte(`"function_call"`)
	doneData        = []byte("[DONE]")
)

func (c *chatStream) event(e event) error {
	s := c.s
	if len(c.pending) == 0 && !bytes.Contains(e.data, toolCallsKey) && !bytes.Contains(e.data, functionCallKey) && !bytes.Contains(e.data, unicodeEscape) || bytes.Equal(e.data, doneData) || len(e.data) == 0 {
		if bytes.Equal(e.data, doneData) {
			c.releaseAll()
		}
		s.write(e.raw)
		s.flush()
		return nil
	}
	var chunk obj
	if err := json.Unmarshal(e.data, &chunk); err != nil {
		return err
	}
	var choices []obj
	_ = json.Unmarshal(chunk["choices"], &choices)
	var pass []obj
	var finished []int
	for _, ch := range choices {
		var idx int
		_ = json.Unmarshal(ch["index"], &idx)
		var delta obj
		_ = json.Unmarshal(ch["delta"], &delta)
		var tcs []obj
		_ = json.Unmarshal(delta["tool_calls"], &tcs)
		pc := c.pending[idx]
		// The deprecated function_call delta is one call, index -1.
		if fc, ok := delta["function_call"]; ok && string(fc) != "null" {
			tcs = append(tcs, obj{"index": json.RawMessage("-1"), "function": fc})
		}
		if pc == nil && len(tcs) == 0 {
			pass = append(pass, ch)
			continue
		}
		if pc == nil {
			pc = &chatChoice{byIdx: map[int]*chatCall{}}
			c.pending[idx] = pc
		}
		for _, td := range tcs {
			var n int
			_ = json.Unmarshal(td["index"], &n)
			call := pc.byIdx[n]
			if call == nil {
				call = &chatCall{index: n}
				pc.byIdx[n] = call
				pc.calls = append(pc.calls, call)
			}
			if id := str(td, "id"); id != "" {
				call.id = id
			}
			var fn obj
			_ = json.Unmarshal(td["function"], &fn)
			if name := str(fn, "name"); name != "" {
				call.name = name
				call.whole += name
			}
			call.args.WriteString(str(fn, "arguments"))
		}
		var hc heldChunk
		if len(choices) == 1 {
			hc = heldChunk{raw: clone(e.raw), data: clone(e.data)}
		} else {
			one := cloneObj(chunk)
			one["choices"] = mustJSON([]obj{ch})
			hc.data = mustJSON(one)
		}
		pc.chunks = append(pc.chunks, hc)
		if err := s.hold(len(hc.raw) + len(hc.data)); err != nil {
			return err
		}
		if fr := ch["finish_reason"]; len(fr) > 0 && string(fr) != "null" {
			finished = append(finished, idx)
		}
	}
	if len(pass) > 0 || len(choices) == 0 {
		if len(pass) == len(choices) {
			s.write(e.raw)
		} else {
			rest := cloneObj(chunk)
			rest["choices"] = mustJSON(pass)
			s.write(formatEvent(e.name, mustJSON(rest)))
		}
	}
	for _, idx := range finished {
		c.release(idx)
	}
	s.flush()
	return nil
}

func cloneObj(o obj) obj {
	out := make(obj, len(o))
	for k, v := range o {
		out[k] = v
	}
	return out
}

func (c *chatStream) releaseAll() {
	for idx := range c.pending {
		c.release(idx)
	}
}

// release judges a choice's calls and writes its held chunks.
func (c *chatStream) release(idx int) {
	s := c.s
	pc := c.pending[idx]
	delete(c.pending, idx)
	if pc == nil {
		return
	}
	s.held = 0
	renum := map[int]int{} // kept calls: old index → new (-1: function_call)
	next := 0
	var lines []string
	for _, call := range pc.calls {
		if call.name == "" {
			continue // never named: nothing the agent could run
		}
		d := s.p.evaluate(s.ctx, s.provider, s.info, call.id, call.name, call.args.Bytes())
		if d.Action != Block && call.whole != call.name {
			d = s.p.evaluate(s.ctx, s.provider, s.info, call.id, call.whole, call.args.Bytes())
		}
		if d.Action == Block {
			lines = append(lines, blockedText(call.name, d))
			continue
		}
		if call.index < 0 {
			renum[-1] = -1
			continue
		}
		renum[call.index] = next
		next++
	}
	for i, hc := range pc.chunks {
		if len(lines) == 0 {
			if hc.raw != nil {
				s.write(hc.raw)
			} else {
				s.write(formatEvent("", hc.data))
			}
			continue
		}
		var chunk obj
		_ = json.Unmarshal(hc.data, &chunk)
		var choices []obj
		_ = json.Unmarshal(chunk["choices"], &choices)
		ch := choices[0]
		var delta obj
		_ = json.Unmarshal(ch["delta"], &delta)
		var tcs []obj
		_ = json.Unmarshal(delta["tool_calls"], &tcs)
		last := i == len(pc.chunks)-1
		if _, ok := renum[-1]; !ok {
			delete(delta, "function_call")
		}
		if len(tcs) > 0 {
			var kept []obj
			for _, tc := range tcs {
				var n int
				_ = json.Unmarshal(tc["index"], &n)
				if nn, ok := renum[n]; ok {
					tc["index"] = mustJSON(nn)
					kept = append(kept, tc)
				}
			}
			if len(kept) > 0 {
				delta["tool_calls"] = mustJSON(kept)
			} else {
				delete(delta, "tool_calls")
			}
		}
		if last {
			// The lines go out before the chunk that ends the choice.
			msg := cloneObj(chunk)
			msg["choices"] = mustJSON([]obj{{"index": mustJSON(idx), "delta": mustJSON(obj{"content": mustJSON(joinText("", lines))}), "finish_reason": json.RawMessage("null")}})
			if fr := str(ch, "finish_reason"); (fr == "tool_calls" || fr == "function_call") && len(renum) == 0 {
				ch["finish_reason"] = mustJSON("stop")
			}
			s.write(formatEvent("", mustJSON(msg)))
		}
		if len(delta) == 0 && (len(ch["finish_reason"]) == 0 || string(ch["finish_reason"]) == "null") {
			continue // nothing left of this chunk
		}
		ch["delta"] = mustJSON(delta)
		chunk["choices"] = mustJSON([]obj{ch})
		s.write(formatEvent("", mustJSON(chunk)))
	}
	s.flush()
}

// end drops what is held: a call whose stream broke off was never judged.
func (c *chatStream) end() {}

// responsesStream follows Responses events. From a function_call output
// item's output_item.added, every event is queued (in order, so the
// client's snapshot keeps output_index equal to position) until the
// output_item.done of every open call, which carries the whole call; then
// the queue goes out with each blocked call's events replaced by those of
// a message item at the same output_index. The final response.completed is
// rewritten to agree.
type responsesStream struct {
	s       *streamer
	queue   []queued
	open    map[int]*respCall   // by output_index, calls not yet done
	blocked map[int]*respCall   // by output_index, judged and blocked
	decided map[string]Decision // by call_id
}

type queued struct {
	outIdx int // -1: not part of a call
	raw    []byte
	seq    json.RawMessage
}

type respCall struct {
	callID, text string
	seqs         []json.RawMessage
}

var functionCallType = []byte(`"function_call"`)

func (r *responsesStream) event(e event) error {
	s := r.s
	final := e.name == "response.completed" || e.name == "response.incomplete" || e.name == "response.failed"
	relevant := bytes.Contains(e.data, functionCallType) || bytes.Contains(e.data, unicodeEscape) || len(r.queue) > 0 || (len(r.decided) > 0 && final)
	if !relevant || len(e.data) == 0 {
		s.write(e.raw)
		s.flush()
		return nil
	}
	var ev obj
	if err := json.Unmarshal(e.data, &ev); err != nil {
		return err
	}
	typ := str(ev, "type")
	final = final || typ == "response.completed" || typ == "response.incomplete" || typ == "response.failed"
	outIdx := -1
	if raw, ok := ev["output_index"]; ok {
		if json.Unmarshal(raw, &outIdx) != nil || outIdx < 0 {
			outIdx = -1
		}
	}
	var item obj
	_ = json.Unmarshal(ev["item"], &item)
	seqNo := clone(ev["sequence_number"])
	isCall := str(item, "type") == "function_call"
	switch {
	case typ == "response.output_item.added" && isCall && outIdx < 0:
		return errors.New("a function call without an output_index")
	case typ == "response.output_item.done" && isCall && r.open[outIdx] == nil:
		// A call never announced by output_item.added (the client's
		// snapshot takes the done item as it is): judged on its own.
		callID, name := str(item, "call_id"), str(item, "name")
		d := s.p.evaluate(s.ctx, s.provider, s.info, callID, name, item["arguments"])
		r.decided[callID] = d
		raw := e.raw
		if d.Action == Block {
			ev["item"] = mustJSON(messageItem(callID, blockedText(name, d), "completed"))
			raw = formatEvent(e.name, mustJSON(ev))
		}
		if len(r.queue) > 0 {
			r.queue = append(r.queue, queued{-1, clone(raw), seqNo})
			return s.hold(len(raw))
		}
		s.write(raw)
		s.flush()
		return nil
	case typ == "response.output_item.added" && isCall:
		if _, dup := r.open[outIdx]; dup {
			return errors.New("two function calls at one output_index")
		}
		r.open[outIdx] = &respCall{callID: str(item, "call_id")}
		r.queue = append(r.queue, queued{outIdx, clone(e.raw), seqNo})
		return s.hold(len(e.raw))
	case final:
		if len(r.queue) > 0 {
			// Calls never completed: they are dropped with the queue's
			// events that belong to them.
			r.release(true)
		}
		var whole obj
		if err := json.Unmarshal(e.data, &whole); err != nil {
			return err
		}
		var resp obj
		if err := json.Unmarshal(whole["response"], &resp); err != nil {
			return err
		}
		out, changed, err := s.p.rewriteOutput(s.ctx, s.provider, s.info, resp["output"], r.decided)
		if err != nil {
			return err
		}
		if changed {
			resp["output"] = out
			whole["response"] = mustJSON(resp)
			s.write(formatEvent(e.name, mustJSON(whole)))
			s.flush()
			return nil
		}
		s.write(e.raw)
		s.flush()
		return nil
	}
	if len(r.queue) == 0 {
		s.write(e.raw)
		s.flush()
		return nil
	}
	if _, isCall := r.open[outIdx]; !isCall {
		outIdx = -1
	}
	r.queue = append(r.queue, queued{outIdx, clone(e.raw), seqNo})
	if err := s.hold(len(e.raw)); err != nil {
		return err
	}
	if outIdx < 0 || typ != "response.output_item.done" || item == nil {
		return nil
	}
	rc := r.open[outIdx]
	delete(r.open, outIdx)
	// The done item is what the client keeps: judge it, whatever its type
	// claims now, by the name it carries.
	callID, name := str(item, "call_id"), str(item, "name")
	d := s.p.evaluate(s.ctx, s.provider, s.info, callID, name, item["arguments"])
	r.decided[callID] = d
	if d.Action == Block {
		rc.callID, rc.text = callID, blockedText(name, d)
		r.blocked[outIdx] = rc
	}
	if len(r.open) == 0 {
		r.release(false)
	}
	return nil
}

// release writes the queue: events of allowed calls and of everything else
// as they came, a blocked call's as a message item. With dropOpen, the
// events of calls still open are dropped.
func (r *responsesStream) release(dropOpen bool) {
	s := r.s
	for _, q := range r.queue {
		if rc := r.blocked[q.outIdx]; q.outIdx >= 0 && rc != nil {
			rc.seqs = append(rc.seqs, q.seq)
		}
	}
	written := map[int]bool{}
	for _, q := range r.queue {
		if q.outIdx >= 0 {
			if _, open := r.open[q.outIdx]; open && dropOpen {
				continue
			}
			if rc := r.blocked[q.outIdx]; rc != nil {
				// The message item takes the call's place.
				if !written[q.outIdx] {
					written[q.outIdx] = true
					r.writeReplacement(q.outIdx, rc.callID, rc.text, rc.seqs)
				}
				continue
			}
		}
		s.write(q.raw)
	}
	r.queue, r.open, r.blocked = r.queue[:0], map[int]*respCall{}, map[int]*respCall{}
	s.held = 0
	s.flush()
}

// writeReplacement emits the events of a message item holding text, at
// the blocked call's output_index, reusing the held events' sequence
// numbers (there are at least as many: added, arguments done, item done).
func (r *responsesStream) writeReplacement(outIdx int, callID, text string, seqs []json.RawMessage) {
	s := r.s
	n := 0
	seq := func() json.RawMessage {
		// More events go out than came in only when the call had no
		// argument deltas; the last number is then repeated.
		i := min(n, len(seqs)-1)
		n++
		return seqs[i]
	}
	itemID := "msg_toolgate_" + callID
	part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
	emit := func(typ string, fields map[string]any) {
		fields["type"] = typ
		if len(seqs) > 0 && len(seqs[0]) > 0 {
			fields["sequence_number"] = seq()
		}
		s.write(formatEvent(typ, mustJSON(fields)))
	}
	emit("response.output_item.added", map[string]any{"output_index": outIdx, "item": messageItem(callID, "", "in_progress")})
	emit("response.content_part.added", map[string]any{"output_index": outIdx, "item_id": itemID, "content_index": 0, "part": part})
	emit("response.output_text.delta", map[string]any{"output_index": outIdx, "item_id": itemID, "content_index": 0, "delta": text})
	emit("response.output_text.done", map[string]any{"output_index": outIdx, "item_id": itemID, "content_index": 0, "text": text})
	done := map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
	emit("response.content_part.done", map[string]any{"output_index": outIdx, "item_id": itemID, "content_index": 0, "part": done})
	emit("response.output_item.done", map[string]any{"output_index": outIdx, "item": messageItem(callID, text, "completed")})
}

func (r *responsesStream) end() {}
