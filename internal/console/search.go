package console

import (
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/pipeline"
)

const (
	defaultTopK = 10
	maxTopK     = 50
	maxQuery    = 1000
)

// SearchData is the search playground's answer (GET /ui/api/search).
type SearchData struct {
	Query     string  `json:"query"`
	TopK      int     `json:"top_k"`
	Threshold float64 `json:"threshold"`
	// Results are what search_tools would return, ranked.
	Results []Ranked `json:"results"`
	// Hidden are the tools a search filter removed, with the filter.
	Hidden []Ranked `json:"hidden"`
	// Steps are the search filters run, with their verdicts and times.
	Steps []Step `json:"steps"`
	Note  string `json:"note,omitempty"`
	Error string `json:"error,omitempty"`
}

// Ranked is one tool with its final score and the index parts behind it.
type Ranked struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Score       float64  `json:"score"`
	Lexical     float64  `json:"lexical"`
	Dense       *float64 `json:"dense,omitempty"`
	HiddenBy    string   `json:"hidden_by,omitempty"`
}

func (c *Console) search(r *http.Request) SearchData {
	q := r.URL.Query()
	d := SearchData{Query: q.Get("q"), TopK: defaultTopK, Threshold: c.g.SimilarityThreshold(), Results: []Ranked{}, Hidden: []Ranked{}, Steps: []Step{}}
	if len(d.Query) > maxQuery {
		d.Query = d.Query[:maxQuery]
	}
	if k, err := strconv.Atoi(q.Get("k")); err == nil && k > 0 {
		d.TopK = min(k, maxTopK)
	}
	if d.Query == "" {
		return d
	}
	query := d.Query
	// The query is shown back; a secret typed into it is not.
	d.Query = c.g.Redact(d.Query)
	ctx := pipeline.WithTrace(r.Context())
	req := &extension.SearchRequest{Query: query, TopK: d.TopK, Session: "console", Principal: extension.PrincipalFrom(ctx).ID()}
	results, note, err := c.g.Search(ctx, req)
	if err != nil {
		d.Error = c.g.Redact(err.Error())
		return d
	}
	d.Note = note
	parts, err := c.g.SearchParts(ctx, query)
	if err != nil {
		parts = nil
	}
	for _, res := range results {
		p := parts[res.Name]
		d.Results = append(d.Results, Ranked{Name: c.g.Redact(res.Name), Description: c.g.Redact(firstLine(res.Description)), Score: res.Score, Lexical: p.Lexical, Dense: p.Dense})
	}
	tr := pipeline.TraceFrom(ctx).Steps()
	d.Steps = append(d.Steps, steps(tr)...)
	for _, s := range tr {
		for _, name := range s.Hid {
			p := parts[name]
			d.Hidden = append(d.Hidden, Ranked{Name: c.g.Redact(name), Lexical: p.Lexical, Dense: p.Dense, HiddenBy: s.Extension})
		}
	}
	sort.SliceStable(d.Hidden, func(i, j int) bool { return d.Hidden[i].HiddenBy < d.Hidden[j].HiddenBy })
	return d
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

func (c *Console) pageSearch(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, "search", c.search(r))
}

func (c *Console) apiSearch(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, c.search(r))
}
