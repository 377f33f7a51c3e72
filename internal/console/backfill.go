package console

import (
	"bufio"
	"encoding/json"
	"io"
	"os"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/gateway"
)

// backfillBytes is how much of the end of the audit log the console reads
// at start, so its pages show what happened before it (a restart, or the
// detections made while the gateway indexed its servers) without reading
// a log that may hold hundreds of megabytes.
const backfillBytes = 1 << 20

// backfill fills the ring and the charts with the last events of the
// audit log's current file. Records carry no filter steps; they are
// redacted again like every event.
func (c *Console) backfill(path string) {
	if path == "" {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		if !os.IsNotExist(err) {
			c.log.Warn("console: cannot read the audit log's recent events", "error", err)
		}
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return
	}
	off := max(0, fi.Size()-backfillBytes)
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), backfillBytes)
	skip := off > 0 // the first line read is cut
	var evs []Event
	for sc.Scan() {
		if skip {
			skip = false
			continue
		}
		var e audit.Event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Type == "" {
			continue
		}
		evs = append(evs, c.convert(gateway.Observed{Time: e.Time, Type: e.Type, Session: e.Session, Principal: e.Principal,
			Server: e.Server, Tool: e.Tool, Action: e.Action, Reason: e.Reason, Fields: e.Fields}))
	}
	if n := len(c.events.buf); len(evs) > n {
		evs = evs[len(evs)-n:]
	}
	for _, e := range evs {
		c.charts.add(e)
		c.events.add(e)
	}
}
