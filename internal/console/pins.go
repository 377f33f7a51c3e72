package console

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/toolgate/toolgate/extension"
	pin "github.com/toolgate/toolgate/extensions/version_pinning"
)

// PinView is one pinned tool on the Pins page and in GET /ui/api/pins;
// Rows is the side-by-side diff of a changed definition.
type PinView struct {
	Server       string     `json:"server"`
	Tool         string     `json:"tool"`
	Status       string     `json:"status"`
	Hash         string     `json:"hash,omitempty"`
	PinnedAt     *time.Time `json:"pinned_at,omitempty"`
	ObservedHash string     `json:"observed_hash,omitempty"`
	ObservedAt   *time.Time `json:"observed_at,omitempty"`
	Rows         []DiffRow  `json:"diff,omitempty"`
}

// DiffRow is one line of a side-by-side diff: Kind is same, changed,
// removed (left only) or added (right only).
type DiffRow struct {
	Kind  string `json:"kind"`
	Left  string `json:"left,omitempty"`
	Right string `json:"right,omitempty"`
}

// BinaryView is a server executable's pin.
type BinaryView struct {
	Server       string `json:"server"`
	Status       string `json:"status"`
	Path         string `json:"path,omitempty"`
	Hash         string `json:"hash,omitempty"`
	ObservedPath string `json:"observed_path,omitempty"`
	ObservedHash string `json:"observed_hash,omitempty"`
}

// PinsData is GET /ui/api/pins.
type PinsData struct {
	Enabled  bool         `json:"enabled"`
	Changed  []PinView    `json:"changed"`
	Tools    []PinView    `json:"tools"`
	Binaries []BinaryView `json:"binaries"`
	Done     string       `json:"-"`
}

// maxDiffLines bounds the lines of a definition that are diffed (pin.Diff
// is quadratic in them).
const maxDiffLines = 400

func (c *Console) pins() (PinsData, error) {
	d := PinsData{Changed: []PinView{}, Tools: []PinView{}, Binaries: []BinaryView{}}
	st := c.pinStore()
	if st == nil {
		return d, nil
	}
	d.Enabled = true
	f, err := st.Latest()
	if err != nil {
		return d, err
	}
	for _, e := range f.ToolEntries() {
		v := PinView{Server: e.Server, Tool: e.Tool, Status: e.Status(), Hash: e.Hash, PinnedAt: e.PinnedAt}
		if e.Observed != nil {
			v.ObservedHash, v.ObservedAt = e.Observed.Hash, &e.Observed.SeenAt
			old := pin.Indent(e.Definition)
			if e.Hash != "" && old == "" {
				old = "(definition not recorded: pinned by hash)"
			}
			v.Rows = c.sideBySide(old, pin.Indent(e.Observed.Definition))
			d.Changed = append(d.Changed, v)
			continue
		}
		d.Tools = append(d.Tools, v)
	}
	for name, b := range f.Binaries {
		bv := BinaryView{Server: name, Status: b.Status(), Path: b.Path, Hash: b.Hash}
		if b.Observed != nil {
			bv.ObservedPath, bv.ObservedHash = b.Observed.Path, b.Observed.Hash
		}
		d.Binaries = append(d.Binaries, bv)
	}
	return d, nil
}

func clip(s string) string {
	lines := strings.Split(s, "\n")
	if len(lines) > maxDiffLines {
		lines = append(lines[:maxDiffLines], fmt.Sprintf("… (%d more lines)", len(lines)-maxDiffLines))
	}
	return strings.Join(lines, "\n")
}

// sideBySide turns pin.Diff's line diff into rows: a run of removed lines
// followed by added ones is paired line by line as changed. Definitions
// come from upstream servers: they are redacted like everything shown.
func (c *Console) sideBySide(a, b string) []DiffRow {
	var rows []DiffRow
	var del, ins []string
	flush := func() {
		for i := range max(len(del), len(ins)) {
			r := DiffRow{Kind: "changed"}
			if i < len(del) {
				r.Left = del[i]
			} else {
				r.Kind = "added"
			}
			if i < len(ins) {
				r.Right = ins[i]
			} else {
				r.Kind = "removed"
			}
			rows = append(rows, r)
		}
		del, ins = del[:0], ins[:0]
	}
	for _, l := range strings.Split(pin.Diff(clip(a), clip(b)), "\n") {
		if len(l) < 2 {
			continue
		}
		text := c.g.Redact(l[2:])
		switch l[:2] {
		case "- ":
			del = append(del, text)
		case "+ ":
			ins = append(ins, text)
		default:
			flush()
			rows = append(rows, DiffRow{Kind: "same", Left: text, Right: text})
		}
	}
	flush()
	return rows
}

func (c *Console) pagePins(w http.ResponseWriter, r *http.Request) {
	d, err := c.pins()
	if err != nil {
		http.Error(w, "console: pins: "+c.g.Redact(err.Error()), http.StatusInternalServerError)
		return
	}
	d.Done = r.URL.Query().Get("done")
	c.render(w, r, "pins", d)
}

func (c *Console) apiPins(w http.ResponseWriter, r *http.Request) {
	d, err := c.pins()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "pins: "+c.g.Redact(err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// trust runs `toolgate pins trust` for the definition the operator saw:
// the form carries its hash, so a definition that changed again since the
// page was drawn is not trusted by accident.
func (c *Console) trust(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, "bad form: "+err.Error())
		return
	}
	server, tool, hash := r.PostForm.Get("server"), r.PostForm.Get("tool"), r.PostForm.Get("hash")
	binary := r.PostForm.Get("binary") == "1"
	if server == "" || (tool == "") != binary || hash == "" {
		writeError(w, http.StatusBadRequest, "trust: server, hash and either tool or binary=1 are required")
		return
	}
	h, err := pin.NormalizeHash(hash)
	if err != nil {
		writeError(w, http.StatusBadRequest, "trust: hash: "+err.Error())
		return
	}
	st := c.pinStore()
	if st == nil {
		writeError(w, http.StatusConflict, errNoPins.Error())
		return
	}
	if binary {
		c.trustBinary(w, r, st, server, h)
		return
	}
	// The button trusts the definition the page showed, nothing else
	// (`toolgate pins trust --hash` can pin a hash never seen; the
	// console cannot).
	if f, err := st.Latest(); err != nil {
		writeError(w, http.StatusInternalServerError, "trust: "+c.g.Redact(err.Error()))
		return
	} else if p := f.Tool(server, tool); p == nil || p.Observed == nil || p.Observed.Hash != h {
		writeError(w, http.StatusConflict, fmt.Sprintf("trust: %s/%s has no changed definition sha256:%s to trust (it may have changed again, or been trusted already): reload the page", server, tool, short(h)))
		return
	}
	msg, err := st.Trust(server, tool, h)
	fields := map[string]any{"via": "console", "hash": "sha256:" + h}
	if err != nil {
		fields["error"] = c.g.Redact(err.Error())
	}
	if rerr := c.g.Record(r.Context(), extension.Event{Type: ActionEvent, Server: server, Tool: tool, Action: "pin_trust", Fields: fields}); rerr != nil {
		// Trusting changes what the gateway lets through: an operator's
		// act that cannot be recorded is reported, not hidden.
		c.log.Error("console: pin trust not recorded", "server", server, "tool", tool, "error", rerr)
	}
	if err != nil {
		c.reply(w, r, http.StatusNotFound, c.g.Redact(err.Error()), base+"pins")
		return
	}
	c.reply(w, r, http.StatusOK, msg, base+"pins")
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// trustBinary runs `toolgate pins trust --binary` for the executable the
// page showed (its hash), and records who did it.
func (c *Console) trustBinary(w http.ResponseWriter, r *http.Request, st *pin.Store, server, hash string) {
	msg, err := st.TrustBinary(server, hash)
	fields := map[string]any{"via": "console", "hash": "sha256:" + hash}
	if err != nil {
		fields["error"] = c.g.Redact(err.Error())
	}
	if rerr := c.g.Record(r.Context(), extension.Event{Type: ActionEvent, Server: server, Action: "pin_trust_binary", Fields: fields}); rerr != nil {
		c.log.Error("console: binary trust not recorded", "server", server, "error", rerr)
	}
	if err != nil {
		c.reply(w, r, http.StatusConflict, c.g.Redact(err.Error())+": reload the page", base+"pins")
		return
	}
	c.reply(w, r, http.StatusOK, msg, base+"pins")
}
