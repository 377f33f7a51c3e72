package gateway

import (
	"context"
	"strings"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/catalog"
)

// Near-duplicates: at ecosystem scale many servers offer the same
// capability (ten send_email tools), and without grouping they fill the
// top k while the other tools a task needs drop out. A tool from another
// server is folded into a better-ranked one when their vectors are this
// alike, or less alike with the same tool name. On the development
// catalogue (MiniLM, embedded text "server__tool: description") the
// cross-server alternatives its queries list score 0.52 (write_file),
// 0.61 (read_file) and 0.79 (search_papers), while same-named tools that
// do different things score 0.29 (fetch: a web page vs a biomedical
// record); the only cross-server pair of different names above 0.8 is a
// true duplicate (get_news, get_ticker_news: 0.81). bench/README.md.
const (
	dupCosine         = 0.8
	dupCosineSameName = 0.5
	// diversifyWindow is how many ranked candidates are grouped, at
	// least; later ones are taken one by one.
	diversifyWindow = 50
)

// Found is one entry of a search answer: a tool, and other servers' tools
// that do the same thing folded into it.
type Found struct {
	extension.SearchResult
	// Alternatives are the folded tools (qualified names, best first).
	// Search filters saw each of them as a result of its own.
	Alternatives []string
}

// entry is one capability in a search answer: the best-ranked tool and
// other servers' near-duplicates of it, best first.
type entry struct {
	members []catalog.Match
}

// diversify groups the ranking into entries, in rank order. Each candidate
// in the window is compared with the first topK leaders only, so the cost
// is bounded by window × topK vector comparisons.
func (g *Gateway) diversify(matches []catalog.Match, topK int) []entry {
	window := min(len(matches), max(diversifyWindow, 8*topK))
	out := make([]entry, 0, len(matches))
	for i, m := range matches {
		if i < window {
			if e := g.duplicateOf(out[:min(len(out), topK)], m); e >= 0 {
				out[e].members = append(out[e].members, m)
				continue
			}
		}
		out = append(out, entry{members: []catalog.Match{m}})
	}
	return out
}

// duplicateOf returns the entry m duplicates, or -1.
func (g *Gateway) duplicateOf(entries []entry, m catalog.Match) int {
	name := normalName(m.Name)
	for i, e := range entries {
		lead := e.members[0]
		if lead.Server == m.Server || hasServer(e.members, m.Server) {
			continue
		}
		cos, ok := g.cat.Cosine(lead.Qualified, m.Qualified)
		if !ok {
			continue
		}
		if cos >= dupCosine || cos >= dupCosineSameName && normalName(lead.Name) == name {
			return i
		}
	}
	return -1
}

func hasServer(ms []catalog.Match, server string) bool {
	for _, m := range ms {
		if m.Server == server {
			return true
		}
	}
	return false
}

// normalName folds case and separators: send_email, sendEmail, send-email.
func normalName(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '_', '-', '.', ' ':
			return -1
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

// filterEntries passes entries through the search filters, best first, in
// chunks, until topK entries have a member left or the entries run out.
// Every member of an entry is judged on its own; the first one left (in
// the filters' order) leads the entry and the others become its
// Alternatives. Definitions are read only for what a filter may inspect
// or the answer shows: with no search filter, the leaders.
func (g *Gateway) filterEntries(ctx context.Context, req *extension.SearchRequest, entries []entry) ([]Found, error) {
	filters := g.pipe.SearchFilters() > 0
	chunk := req.TopK
	if filters {
		chunk = max(4*req.TopK, searchChunk)
	}
	var out []Found
	for lo := 0; lo == 0 || lo < len(entries) && len(out) < req.TopK; {
		hi := min(lo+chunk, len(entries))
		var part []extension.SearchResult
		owner := map[string]int{}
		for i, e := range entries[lo:hi] {
			for j, m := range e.members {
				owner[m.Qualified] = i
				if j == 0 || filters {
					part = append(part, searchResult(m.Tool, m.Score))
				} else {
					part = append(part, extension.SearchResult{Name: m.Qualified, Server: m.Server, Tool: m.Name, Score: m.Score})
				}
			}
		}
		part, err := g.pipe.Search(ctx, req, part)
		if err != nil {
			return nil, err
		}
		at := map[int]int{} // entry → index in out
		for _, r := range part {
			i, ok := owner[r.Name]
			if !ok {
				continue // a filter added a result: not from this ranking
			}
			if k, ok := at[i]; ok {
				out[k].Alternatives = append(out[k].Alternatives, r.Name)
				continue
			}
			if r.Def == nil {
				if t, ok := g.cat.Lookup(r.Name); ok {
					r = searchResult(t, r.Score)
				}
			}
			at[i] = len(out)
			out = append(out, Found{SearchResult: r})
		}
		lo = max(hi, 1)
	}
	return out, nil
}
