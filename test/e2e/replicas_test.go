package e2e

// Three replicas of one gateway on one Redis (state backend "redis"),
// behind a round-robin load balancer the test runs (no stickiness), driven
// by stateless SDK clients (protocol 2026-07-28: no session to stick to).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/state/redistest"
)

// replicaConfig writes a config whose state is in the Redis at redisURL.
func replicaConfig(t *testing.T, redisURL string, servers, filters map[string]any, extra map[string]any) string {
	t.Helper()
	p := writeConfig(t, servers, filters)
	var cfg map[string]any
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["search"] = map[string]any{"mode": "lexical"}
	cfg["state"] = map[string]any{"backend": "redis", "url": redisURL, "prefix": "e2e:"}
	for k, v := range extra {
		cfg[k] = v
	}
	if err := os.WriteFile(p, mustJSON(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// replica is one gateway of the set, with its own state folder (its own
// audit chain).
type replica struct {
	*gatewayProc
	state string
}

func startReplicas(t *testing.T, cfg string, n int) []*replica {
	t.Helper()
	rs := make([]*replica, n)
	for i := range rs {
		st := t.TempDir()
		rs[i] = &replica{gatewayProc: startHTTPEarly(t, cfg, "--state-dir", st), state: st}
	}
	for _, r := range rs {
		waitReady(t, r.Logs)
	}
	return rs
}

// roundRobin is the load balancer: every request goes to the next replica
// in turn, whatever it carries (no stickiness).
func roundRobin(t *testing.T, rs []*replica) string {
	t.Helper()
	var targets []*url.URL
	for _, r := range rs {
		u, err := url.Parse(strings.TrimSuffix(r.URL, "/mcp"))
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, u)
	}
	var next atomic.Uint64
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(targets[(next.Add(1)-1)%uint64(len(targets))])
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "bad gateway: "+err.Error(), http.StatusBadGateway)
		},
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// tokenFor searches through cs until one result holds every tool in want,
// and returns its discovery token.
func tokenFor(t *testing.T, cs *mcp.ClientSession, query string, topK int, want ...string) string {
	t.Helper()
	res := call(t, cs, "search_tools", map[string]any{"query": query, "top_k": topK})
	for _, w := range want {
		if !slices.Contains(found(t, res), w) {
			t.Fatalf("search %q = %v, want %s", query, found(t, res), w)
		}
	}
	return discoveryToken(t, res)
}

func echoArgs(tool, token, msg string) map[string]any {
	return map[string]any{"tool_name": tool, "arguments": map[string]any{"message": msg}, "discovery_token": token}
}

// TestReplicasRateLimit: a limit of 60 calls per minute holds across three
// replicas within ±5 %: clients calling far faster than the limit through
// the round-robin balancer get the one bucket's calls, not three buckets'.
func TestReplicasRateLimit(t *testing.T) {
	rd := redistest.Start(t)
	cfg := replicaConfig(t, rd.URL(), everythingOnly(), map[string]any{
		"rate_limits": map[string]any{"default_rpm": 60, "default_burst": 1, "burst": map[string]any{"enabled": false}},
	}, nil)
	rs := startReplicas(t, cfg, 3)
	lb := roundRobin(t, rs)

	const clients, duration = 3, 30 * time.Second
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan string, clients)
	start := time.Now()
	var lastStart atomic.Int64
	for c := range clients {
		cs := connectHTTP(t, lb, "")
		// The search runs on one replica, the calls on all three: the
		// token key is shared through Redis.
		tok := tokenFor(t, cs, "echo a message back", 1, "everything__echo")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Since(start) < duration; i++ {
				lastStart.Store(int64(time.Since(start)))
				res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "call_tool", Arguments: echoArgs("everything__echo", tok, fmt.Sprintf("c%d-%d", c, i))})
				switch {
				case err != nil:
					errs <- err.Error()
					return
				case !res.IsError:
					admitted.Add(1)
				case strings.Contains(text(res), "calls per minute"):
					refused.Add(1)
				default:
					errs <- text(res)
					return
				}
				time.Sleep(30 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatalf("unexpected refusal: %s", e)
	}
	// The bucket starts with one call and earns one per second.
	elapsed := time.Duration(lastStart.Load())
	want := 1 + elapsed.Seconds()
	got := float64(admitted.Load())
	t.Logf("three replicas, %v: %d calls admitted, %d refused; one bucket allows %.1f", elapsed.Round(time.Millisecond), admitted.Load(), refused.Load(), want)
	if got < want*0.95-1 || got > want*1.05+1 {
		t.Fatalf("%v calls admitted in %v across three replicas, want %.1f ±5%% (60 per minute)", got, elapsed, want)
	}
	if refused.Load() < 3*admitted.Load() {
		t.Fatalf("only %d calls refused: the clients did not press the limit", refused.Load())
	}
	for _, r := range rs {
		noPanic(t, r.Logs.String())
	}
}

// TestReplicasFlowAndRedisOutage: a read on one replica, then a send on
// another, is blocked; with Redis stopped, calls needing a flow decision
// are refused naming Redis while searches keep working; once Redis is back
// traffic recovers without restarting anything.
func TestReplicasFlowAndRedisOutage(t *testing.T) {
	rd := redistest.Start(t)
	servers := map[string]any{"vault": stdioServer("everything"), "mail": stdioServer("everything")}
	cfg := replicaConfig(t, rd.URL(), servers, map[string]any{
		"cross_server": map[string]any{"classify": []map[string]any{
			{"tools": "vault__*", "category": "read"}, {"tools": "mail__*", "category": "send"},
		}},
	}, nil)
	rs := startReplicas(t, cfg, 3)
	a, b := connectHTTP(t, rs[0].URL, ""), connectHTTP(t, rs[1].URL, "")
	tok := tokenFor(t, a, "echo a message back", 10, "vault__echo", "mail__echo")

	wantOK(t, "send before any read", call(t, b, "call_tool", echoArgs("mail__echo", tok, "hi")), "hi")
	wantOK(t, "read on replica 0", call(t, a, "call_tool", echoArgs("vault__echo", tok, "secret")), "secret")
	wantRefused(t, "send on replica 1 after the read on replica 0", call(t, b, "call_tool", echoArgs("mail__echo", tok, "exfil")), "read_then_send")

	// Through the balancer: every replica refuses the send.
	lb := connectHTTP(t, roundRobin(t, rs), "")
	for i := range 3 {
		wantRefused(t, fmt.Sprintf("send %d through the balancer", i), call(t, lb, "call_tool", echoArgs("mail__echo", tok, "exfil")), "read_then_send")
	}

	rd.Stop()
	for i := range 3 {
		wantRefused(t, fmt.Sprintf("call %d with Redis down", i), call(t, lb, "call_tool", echoArgs("vault__echo", tok, "x")), "Redis", "unreachable")
		if got := search(t, lb, "echo a message back", 2); len(got) == 0 {
			t.Fatalf("search %d with Redis down found nothing", i)
		}
	}
	rd.Restart()
	deadline := time.Now().Add(20 * time.Second)
	for ok := 0; ok < 3; {
		res := call(t, lb, "call_tool", echoArgs("vault__echo", tok, "back"))
		if !res.IsError {
			ok++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls still refused 20 s after Redis came back: %s", text(res))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Decisions are shared again: the read just made blocks a send anywhere.
	for i := range 3 {
		wantRefused(t, fmt.Sprintf("send %d after recovery", i), call(t, lb, "call_tool", echoArgs("mail__echo", tok, "exfil")), "read_then_send")
	}
	for _, r := range rs {
		noPanic(t, r.Logs.String())
	}
}

// TestReplicasKillUnderLoad: kill -9 one replica while clients call
// through the balancer; the clients retry on the others, every call a
// client saw succeed is in some replica's audit log, and every replica's
// chain verifies, the killed one's included.
func TestReplicasKillUnderLoad(t *testing.T) {
	rd := redistest.Start(t)
	cfg := replicaConfig(t, rd.URL(), everythingOnly(), nil, map[string]any{"audit": map[string]any{"record_arguments": true}})
	rs := startReplicas(t, cfg, 3)
	lb := roundRobin(t, rs)

	const clients = 4
	var mu sync.Mutex
	var acked []string
	var retried atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range clients {
		cs := connectHTTP(t, lb, "")
		tok := tokenFor(t, cs, "echo a message back", 1, "everything__echo")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				msg := fmt.Sprintf("ack%d_%d_ack", c, i)
				for try := 0; ; try++ {
					res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "call_tool", Arguments: echoArgs("everything__echo", tok, msg)})
					if err == nil && !res.IsError {
						mu.Lock()
						acked = append(acked, msg)
						mu.Unlock()
						break
					}
					if try == 10 {
						t.Errorf("call %s failed 10 times: %v %v", msg, err, res)
						return
					}
					retried.Add(1) // the balancer sent it to the dead replica
				}
			}
		}()
	}
	time.Sleep(2 * time.Second)
	victim := rs[1]
	if err := syscall.Kill(-victim.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d calls acknowledged, %d retried after the kill", len(acked), retried.Load())
	if retried.Load() == 0 {
		t.Fatal("no call hit the killed replica: the kill was not under load")
	}

	var all strings.Builder
	for i, r := range rs {
		out, err := exec.Command(binPath, "audit", "verify", "--state-dir", r.state).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "chain intact") {
			t.Fatalf("audit verify of replica %d: %v\n%s", i, err, out)
		}
		for _, e := range auditEvents(t, r.state) {
			if e["type"] == "tool_called" && e["action"] == "ok" {
				b, _ := json.Marshal(e)
				all.Write(b)
			}
		}
	}
	lost := 0
	for _, m := range acked {
		if !strings.Contains(all.String(), m) {
			lost++
			t.Errorf("acknowledged call %s is in no replica's audit log", m)
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged calls lost", lost, len(acked))
	}

	// The merged view in Redis: every replica's records, each with its
	// replica, every chain intact (the killed one's ends where its mirror
	// stopped).
	out, err := exec.Command(binPath, "audit", "verify", "--state", rd.URL(), "--state-prefix", "e2e:").CombinedOutput()
	if err != nil || strings.Count(string(out), "chain intact") != 3 {
		t.Fatalf("audit verify --state: %v\n%s", err, out)
	}
	t.Logf("audit verify --state:\n%s", out)
	out, err = exec.Command(binPath, "events", "--type", "tool_called", "--state", rd.URL(), "--state-prefix", "e2e:", "--json").Output()
	if err != nil {
		t.Fatalf("toolgate events --state: %v", err)
	}
	replicas := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var e struct {
			Replica string `json:"replica"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Replica == "" {
			t.Fatalf("merged view record without a replica: %s", line)
		}
		replicas[e.Replica]++
	}
	if len(replicas) != 3 {
		t.Fatalf("merged view has calls of %d replicas (%v), want 3", len(replicas), replicas)
	}
}

// TestReplicasPinsTrust: a pin in Redis holds on every replica, and one
// `toolgate pins trust --state redis://...` lets the tool through on all
// of them, without a restart.
func TestReplicasPinsTrust(t *testing.T) {
	rd := redistest.Start(t)
	pins := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(binPath, append([]string{"pins", "trust", "--state", rd.URL(), "--state-prefix", "e2e:", "--server", "everything", "--tool", "echo"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("toolgate pins trust %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	// A pin that is not what the server serves (as after a change).
	pins("--hash", strings.Repeat("0", 64))
	cfg := replicaConfig(t, rd.URL(), everythingOnly(), nil, nil)
	rs := startReplicas(t, cfg, 3)
	lb := connectHTTP(t, roundRobin(t, rs), "")
	tok := tokenFor(t, lb, "echo a message back", 1, "everything__echo")
	for i := range 3 {
		wantRefused(t, fmt.Sprintf("call %d against the old pin", i), call(t, lb, "call_tool", echoArgs("everything__echo", tok, "x")), "changed since it was pinned")
	}
	t.Log(pins())
	for i := range 3 {
		wantOK(t, fmt.Sprintf("call %d after one trust", i), call(t, lb, "call_tool", echoArgs("everything__echo", tok, "trusted")), "trusted")
	}
	for _, r := range rs {
		noPanic(t, r.Logs.String())
	}
}

// TestReplicasRunTimeLoad: a server loaded at run time through one replica
// is loaded by the others too, so the client finds and calls its tools
// whichever replica answers.
func TestReplicasRunTimeLoad(t *testing.T) {
	rd := redistest.Start(t)
	remote := startEverythingHTTP(t)
	cfg := replicaConfig(t, rd.URL(), map[string]any{}, map[string]any{"load_control": map[string]any{"deny_private_networks": false}}, nil)
	rs := startReplicas(t, cfg, 3)
	first := connectHTTP(t, rs[0].URL, "")
	wantOK(t, "load on replica 0", call(t, first, "load_mcp_server", map[string]any{"server_name": "remote", "url": remote}), "remote")

	for i, r := range rs[1:] {
		cs := connectHTTP(t, r.URL, "")
		deadline := time.Now().Add(30 * time.Second)
		for {
			res := call(t, cs, "search_tools", map[string]any{"query": "echo a message back", "top_k": 5})
			if slices.Contains(found(t, res), "remote__echo") {
				wantOK(t, fmt.Sprintf("call on replica %d", i+1), call(t, cs, "call_tool", echoArgs("remote__echo", discoveryToken(t, res), "far")), "far")
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d never loaded the server replica 0 loaded", i+1)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// A replica started afterwards loads it at startup.
	late := startReplicas(t, cfg, 1)[0]
	cs := connectHTTP(t, late.URL, "")
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Contains(search(t, cs, "echo a message back", 5), "remote__echo") {
		if time.Now().After(deadline) {
			t.Fatal("a replica started after the load never loaded the server")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sticky is a load balancer for stateful sessions: it learns each
// session's replica from the Mcp-Session-Id of the response that created
// it (as HAProxy's stick store-response does) and sends the session's
// requests there; requests without a session, or whose replica is down,
// go round-robin.
type sticky struct {
	targets []*url.URL
	next    atomic.Uint64
	mu      sync.Mutex
	owner   map[string]*url.URL
	down    map[string]bool
}

func stickyBalancer(t *testing.T, rs []*replica) (*sticky, string) {
	t.Helper()
	s := &sticky{owner: map[string]*url.URL{}, down: map[string]bool{}}
	for _, r := range rs {
		u, err := url.Parse(strings.TrimSuffix(r.URL, "/mcp"))
		if err != nil {
			t.Fatal(err)
		}
		s.targets = append(s.targets, u)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			s.mu.Lock()
			u := s.owner[pr.In.Header.Get("Mcp-Session-Id")]
			if u == nil || s.down[u.Host] {
				for {
					u = s.targets[(s.next.Add(1)-1)%uint64(len(s.targets))]
					if !s.down[u.Host] {
						break
					}
				}
			}
			s.mu.Unlock()
			pr.SetURL(u)
		},
		ModifyResponse: func(resp *http.Response) error {
			if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
				s.mu.Lock()
				if _, known := s.owner[id]; !known {
					u := *resp.Request.URL
					u.Path = ""
					s.owner[id] = &u
				}
				s.mu.Unlock()
			}
			return nil
		},
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return s, srv.URL + "/mcp"
}

func (s *sticky) markDown(r *replica) {
	u, _ := url.Parse(r.URL)
	s.mu.Lock()
	s.down[u.Host] = true
	s.mu.Unlock()
}

// TestReplicasStickySessions: stateful sessions behind a balancer that
// learns the session id (the documented setup); their discovery records
// are in Redis. When a session's replica dies, its next request reaches
// another replica, which answers 404 for the unknown session as the
// specification says; the client starts a new session there and carries on.
func TestReplicasStickySessions(t *testing.T) {
	rd := redistest.Start(t)
	cfg := replicaConfig(t, rd.URL(), everythingOnly(), nil, nil)
	rs := startReplicas(t, cfg, 3)
	lb, endpoint := stickyBalancer(t, rs)

	cs := connectHTTP(t, endpoint, "2025-11-25")
	if cs.ID() == "" {
		t.Fatal("no stateful session")
	}
	wantRefused(t, "call before search", callTool(t, cs, "everything__echo", map[string]any{"message": "x"}), "search_tools")
	if got := search(t, cs, "echo a message back", 1); !slices.Contains(got, "everything__echo") {
		t.Fatalf("search = %v", got)
	}
	for i := range 3 {
		wantOK(t, fmt.Sprintf("call %d in the session", i), callTool(t, cs, "everything__echo", map[string]any{"message": "sticky"}), "sticky")
	}
	if n := rd.Backend(t, "probe").Client.Keys(context.Background(), "e2e:gate:*").Val(); len(n) == 0 {
		t.Fatal("no discovery record of the session in Redis")
	}

	lb.mu.Lock()
	owner := lb.owner[cs.ID()]
	lb.mu.Unlock()
	var victim *replica
	for _, r := range rs {
		if strings.Contains(r.URL, owner.Host) {
			victim = r
		}
	}
	if victim == nil {
		t.Fatalf("the balancer did not learn the session's replica (%v)", owner)
	}
	_ = syscall.Kill(-victim.cmd.Process.Pid, syscall.SIGKILL)
	lb.markDown(victim)
	_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "everything__echo", "arguments": map[string]any{"message": "x"}}})
	if err == nil {
		t.Fatal("a call in the dead replica's session succeeded on another replica")
	}
	t.Logf("the dead replica's session, on another replica: %v", err)
	cs2 := connectHTTP(t, endpoint, "2025-11-25")
	if got := search(t, cs2, "echo a message back", 1); !slices.Contains(got, "everything__echo") {
		t.Fatalf("search in the new session = %v", got)
	}
	wantOK(t, "call in the new session", callTool(t, cs2, "everything__echo", map[string]any{"message": "again"}), "again")
}
