package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An upstream that floods notifications/tools/list_changed (issue 14 item
// 9): test/servers/listflood serves N tools and sends bursts of
// notifications, changing its definitions between listings. The gateway
// must coalesce the re-lists and record each definition once per hash, so
// the audit log grows with the tools, not with the notifications.

type floodCount struct {
	Lists     int `json:"lists"`
	Bursts    int `json:"bursts"`
	AfterLast int `json:"lists_after_last_burst"`
}

func readFloodCount(t *testing.T, path string) floodCount {
	t.Helper()
	var c floodCount
	b, err := os.ReadFile(path)
	if err != nil {
		return c
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

// startFlood runs the gateway (lexical search, default protections) in
// front of listflood with args, and returns the state folder and the
// server's count file. limits, when not nil, is the config's "limits".
func startFlood(t *testing.T, tools int, limits map[string]any, args ...string) (state, countFile string, logs *syncBuffer) {
	t.Helper()
	state = t.TempDir()
	countFile = filepath.Join(t.TempDir(), "count.json")
	bin := helperBinary(t, "listflood", "./test/servers/listflood")
	cfg := map[string]any{
		"mcpServers": map[string]any{"flood": map[string]any{"command": bin, "args": append([]string{"-tools", fmt.Sprint(tools), "-count", countFile}, args...)}},
		"filters":    map[string]any{},
		"search":     map[string]any{"mode": "lexical"},
	}
	if limits != nil {
		cfg["limits"] = limits
	}
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, mustJSON(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	_, logs = startStdio(t, p, "--state-dir", state, "--log-level", "debug")
	return state, countFile, logs
}

// settle waits until cond holds and the gateway has finished indexing
// every listing the server answered, then until the audit log stops
// growing for a while, or fails. It does not depend on how fast the
// machine is: each listing is waited for, not guessed at.
func settle(t *testing.T, state, countFile string, logs *syncBuffer, cond func(floodCount) bool) floodCount {
	t.Helper()
	done := func() bool {
		c := readFloodCount(t, countFile)
		return cond(c) && listings(logs) >= c.Lists
	}
	if !waitFor(3*time.Minute, done) {
		t.Fatalf("listflood never reached the expected state (count %+v, %d listings indexed by the gateway)\nlogs:\n%s", readFloodCount(t, countFile), listings(logs), logs)
	}
	size := func() int64 {
		fi, err := os.Stat(filepath.Join(state, "audit.jsonl"))
		if err != nil {
			return -1
		}
		return fi.Size()
	}
	lastSize, lastCount, quiet := size(), readFloodCount(t, countFile), 0
	for range 240 {
		time.Sleep(500 * time.Millisecond)
		s, c := size(), readFloodCount(t, countFile)
		if s == lastSize && c == lastCount && done() {
			if quiet++; quiet >= 4 {
				return c
			}
			continue
		}
		lastSize, lastCount, quiet = s, c, 0
	}
	t.Fatalf("the audit log never stopped growing (count %+v)", readFloodCount(t, countFile))
	return floodCount{}
}

// listings counts the gateway's listings of server flood, from its log.
func listings(logs *syncBuffer) int {
	// Every listing, the first included, is logged at debug.
	return strings.Count(logs.String(), `msg="listed server" server=flood `)
}

// recordStats summarises the audit records by type, for failure messages.
func recordStats(recs []auditRecord) map[string]int {
	m := map[string]int{}
	for _, r := range recs {
		m[r.Type+" "+r.Reason]++
	}
	return m
}

func countRecords(recs []auditRecord, typ, server string) int {
	n := 0
	for _, r := range recs {
		if r.Type == typ && r.Server == server {
			n++
		}
	}
	return n
}

// TestListChangedFloodBurst: one burst of 50 notifications, each listing
// answering with new definitions. The burst costs at most a couple of
// listings (not 50), and each at most one record per tool and protection.
func TestListChangedFloodBurst(t *testing.T) {
	t.Parallel()
	// Few enough tools that, under -race on a busy machine, listing
	// without coalescing would keep up with the notifications.
	const tools, burst = 100, 50
	state, countFile, logs := startFlood(t, tools, nil, "-burst", fmt.Sprint(burst), "-mutate", "every", "-interval", "300ms")
	settle(t, state, countFile, logs, func(c floodCount) bool { return c.Bursts == 1 && c.AfterLast >= 1 })
	checkFlood(t, state, logs, tools, burst, 4)
}

// TestListChangedFloodSustained: 40 notifications 100 ms apart, each
// listing answering with new definitions. One re-list at a time, the
// notifications during it folded into one more, and the rate limit: the
// flood costs a handful of listings, not 40.
func TestListChangedFloodSustained(t *testing.T) {
	t.Parallel()
	const tools, bursts = 50, 40
	state, countFile, logs := startFlood(t, tools, nil, "-burst", "1", "-bursts", fmt.Sprint(bursts), "-interval", "100ms", "-mutate", "every")
	settle(t, state, countFile, logs, func(c floodCount) bool { return c.Bursts == bursts && c.AfterLast >= 1 })
	// limits.list_changed_per_minute (6, after a burst of 3) allows about
	// 4 re-lists in the seconds the flood lasts, plus the startup listing.
	checkFlood(t, state, logs, tools, bursts, 8)
}

// TestListChangedRateLimited: the server answers every listing with a new
// burst of notifications at once, as fast as the gateway re-lists. After
// the burst allowance (3) a re-list waits for the default
// limits.list_changed_per_minute (6), with one warning; each burst of ten
// costs one listing, two if a notification straggles past the debounce.
func TestListChangedRateLimited(t *testing.T) {
	t.Parallel()
	const tools, bursts = 20, 4
	state, countFile, logs := startFlood(t, tools, nil, "-burst", "10", "-bursts", fmt.Sprint(bursts), "-interval", "0s", "-await", "-mutate", "every")
	c := settle(t, state, countFile, logs, func(c floodCount) bool { return c.Bursts == bursts && c.AfterLast >= 1 })
	if n := listings(logs); n < bursts+1 || n > 2*bursts+1 {
		t.Errorf("%d bursts of 10 notifications caused %d listings (%d served); want %d to %d", bursts, n, c.Lists, bursts+1, 2*bursts+1)
	}
	if w := strings.Count(logs.String(), "faster than limits.list_changed_per_minute"); w != 1 {
		t.Errorf("%d warnings about the rate of notifications in the log, want 1", w)
	}
	noPanic(t, logs.String())
}

// checkFlood bounds the listings the flood caused and the audit records
// they wrote: one tool_seen per tool, then per listing at most one
// tool_changed and one version_pinning detection per tool. The records are
// read before the listings are counted, so a listing still being
// recorded is counted.
func checkFlood(t *testing.T, state string, logs *syncBuffer, tools, notifications, maxListings int) {
	t.Helper()
	recs := auditLog(t, state)
	n := listings(logs)
	if n < 2 || n > maxListings {
		t.Errorf("%d notifications caused %d listings of the server; want 2 to %d", notifications, n, maxListings)
	}
	if seen := countRecords(recs, "tool_seen", "flood"); seen != tools {
		t.Errorf("tool_seen records = %d, want %d (one per tool)", seen, tools)
	}
	if limit := tools + 2*tools*(n-1) + 20; len(recs) > limit {
		t.Errorf("%d notifications wrote %d audit records (%v) for %d tools and %d listings; want at most %d", notifications, len(recs), recordStats(recs), tools, n, limit)
	}
	t.Logf("%d notifications: %d listings, %d audit records", notifications, n, len(recs))
	noPanic(t, logs.String())
}

// TestListChangedFloodOncePerHash: four bursts flip every definition
// between two versions and back, each burst sent once the gateway has
// listed the previous version. Each distinct definition is recorded once:
// the return to a definition already recorded writes nothing.
func TestListChangedFloodOncePerHash(t *testing.T) {
	t.Parallel()
	const tools, bursts = 200, 4
	state, countFile, logs := startFlood(t, tools, nil, "-burst", "5", "-bursts", fmt.Sprint(bursts), "-interval", "300ms", "-await", "-mutate", "alternate")
	c := settle(t, state, countFile, logs, func(c floodCount) bool { return c.Bursts == bursts && c.AfterLast >= 1 })

	recs := auditLog(t, state)
	seen, changed := countRecords(recs, "tool_seen", "flood"), countRecords(recs, "tool_changed", "flood")
	pins := 0
	for _, r := range recs {
		if r.Type == "detection" && r.Server == "flood" && strings.HasPrefix(r.Reason, "version_pinning") {
			pins++
		}
	}
	if seen != tools || changed != tools || pins != tools {
		t.Errorf("after %d flips of %d tools (%d listings by the gateway, %d served): tool_seen %d, tool_changed %d, version_pinning detections %d; want %d each (one per distinct definition)\n%v",
			bursts, tools, listings(logs), c.Lists, seen, changed, pins, tools, recordStats(recs))
	}
	noPanic(t, logs.String())
}
