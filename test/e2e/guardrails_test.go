package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// processorProc is a running examples/extmcp-processor.
type processorProc struct {
	Addr string
	Logs *syncBuffer
	cmd  *exec.Cmd
	done chan struct{}
}

var processorAddrRE = regexp.MustCompile(`msg=listening addr=(\S+)`)

// startProcessor builds and starts the example ExtMCP processor on a free
// loopback port with the given flags.
func startProcessor(t *testing.T, flags ...string) *processorProc {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "extmcp-processor")
	build := exec.Command("go", "build", "-o", bin, "./examples/extmcp-processor")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the example processor: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, append([]string{"-listen", "127.0.0.1:0"}, flags...)...)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &processorProc{Logs: &syncBuffer{}, cmd: cmd, done: make(chan struct{})}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			p.Logs.Write([]byte(line + "\n"))
			if m := processorAddrRE.FindStringSubmatch(line); m != nil {
				select {
				case addrc <- m[1]:
				default:
				}
			}
		}
	}()
	go func() {
		cmd.Wait()
		pw.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("processor %v logs:\n%s", flags, p.Logs)
		}
	})
	select {
	case p.Addr = <-addrc:
	case <-p.done:
		t.Fatalf("the processor exited:\n%s", p.Logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("the processor did not start listening:\n%s", p.Logs)
	}
	return p
}

// Stop kills the processor and waits for it to exit.
func (p *processorProc) Stop() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// guardProc is a processor entry of filters.guardrails.processors.
func guardProc(addr string, methods map[string]string, extra ...string) map[string]any {
	e := map[string]any{"kind": "remote", "host": addr, "methods": methods}
	for i := 0; i+1 < len(extra); i += 2 {
		e[extra[i]] = extra[i+1]
	}
	return e
}

// startGuarded starts toolgate over stdio with server-everything, lexical
// search and the given guardrail processors.
func startGuarded(t *testing.T, procs ...map[string]any) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	p := writeConfig(t, everythingOnly(), map[string]any{"guardrails": map[string]any{"processors": procs}})
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["search"] = map[string]any{"mode": "lexical"}
	if err := os.WriteFile(p, mustJSON(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return startStdio(t, p)
}

// refusal checks res is an isError refusal with JSON-RPC code in its
// structuredContent and returns its text.
func refusal(t *testing.T, what string, res *mcp.CallToolResult, code int64) string {
	t.Helper()
	if !res.IsError {
		t.Fatalf("%s: want an isError refusal, got success: %s", what, text(res))
	}
	var sc struct {
		Error struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Rule string `json:"rule"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &sc); err != nil || sc.Error.Code != code || sc.Error.Message == "" || !strings.HasPrefix(sc.Rule, "guardrails.processors[") {
		t.Fatalf("%s: structuredContent %s, want error.code %d, a message and a guardrails rule (text: %s)", what, b, code, text(res))
	}
	if !strings.Contains(text(res), sc.Error.Message) {
		t.Fatalf("%s: text %q does not carry the reason %q", what, text(res), sc.Error.Message)
	}
	return text(res)
}

func TestGuardrailsPassAndMutate(t *testing.T) {
	t.Parallel()
	passer := startProcessor(t)
	reqRedactor := startProcessor(t, "-redact", `secret-[0-9]+`)
	respRedactor := startProcessor(t, "-redact", `Echo`, "-deny", "get-env")
	cs, logs := startGuarded(t,
		guardProc(passer.Addr, map[string]string{"tools/call": "full", "tools/list": "full"}),
		guardProc(reqRedactor.Addr, map[string]string{"tools/call": "request"}),
		guardProc(respRedactor.Addr, map[string]string{"tools/call": "response", "tools/list": "response"}),
	)

	// tools/list response: the third processor drops get-env from what
	// search shows, so it cannot be called either.
	if got := search(t, cs, "print environment variables", 5); slices.Contains(got, "everything__get-env") {
		t.Fatalf("search shows %v, want get-env dropped by the processor", got)
	}
	wantRefused(t, "call of a dropped tool", callTool(t, cs, "everything__get-env", map[string]any{}), "search_tools")

	if got := search(t, cs, "echo a message back", 5); !slices.Contains(got, "everything__echo") {
		t.Fatalf("search for echo = %v", got)
	}
	// The request redactor rewrites the argument before the upstream sees
	// it; the response redactor rewrites "Echo" in the result.
	res := callTool(t, cs, "everything__echo", map[string]any{"message": "my key is secret-12345"})
	if res.IsError || text(res) != "[REDACTED]: my key is [REDACTED]" {
		t.Fatalf("echo through the redactors = %v %q", res.IsError, text(res))
	}
	// Every processor saw the real tool name with the server apart.
	for _, p := range []*processorProc{passer, reqRedactor, respRedactor} {
		if !waitFor(5*time.Second, func() bool { return strings.Contains(p.Logs.String(), "services=[everything]") }) {
			t.Fatalf("processor logs lack services=[everything]:\n%s", p.Logs)
		}
	}
	// A processor logs its decision after it answers, so its log line
	// may trail the call's result a little.
	logged := func(p *processorProc, subs ...string) bool {
		return waitFor(5*time.Second, func() bool {
			for _, s := range subs {
				if !strings.Contains(p.Logs.String(), s) {
					return false
				}
			}
			return true
		})
	}
	if !logged(passer, "msg=request method=tools/call services=[everything] tool=echo decision=pass",
		"msg=response method=tools/call services=[everything] decision=pass",
		"msg=response method=tools/list services=[everything] decision=pass") {
		t.Fatalf("pass processor logs:\n%s", passer.Logs)
	}
	if !logged(reqRedactor, "tool=echo decision=mutate") || strings.Contains(reqRedactor.Logs.String(), "msg=response") {
		t.Fatalf("request redactor logs (want one mutated request and no response phase):\n%s", reqRedactor.Logs)
	}
	if !logged(respRedactor, "msg=response method=tools/call services=[everything] decision=mutate") || strings.Contains(respRedactor.Logs.String(), "msg=request") {
		t.Fatalf("response redactor logs (want a mutated response and no request phase):\n%s", respRedactor.Logs)
	}
	noPanic(t, logs.String())
}

func TestGuardrailsDenyCodes(t *testing.T) {
	t.Parallel()
	// Denies the echo tool when asked in the request phase.
	byName := startProcessor(t, "-deny", "echo", "-deny-reason", "echo is not allowed here")
	// Denies any result that reports a sum, with RESOURCE_EXHAUSTED.
	byContent := startProcessor(t, "-deny-content", `The sum of`, "-deny-code", "resource_exhausted", "-deny-reason", "sum quota used up")
	// Denies get-tiny-image with INVALID and an explicit JSON-RPC error.
	override := startProcessor(t, "-deny", "get-tiny-image", "-deny-code", "invalid", "-mcp-error", `{"code":-32042,"message":"images are off"}`)
	cs, logs := startGuarded(t,
		guardProc(byName.Addr, map[string]string{"tools/call": "request"}),
		guardProc(byContent.Addr, map[string]string{"tools/call": "response"}),
		guardProc(override.Addr, map[string]string{"tools/call": "request"}),
	)
	search(t, cs, "echo a message back", 5)
	search(t, cs, "add two numbers and return the sum", 5)
	search(t, cs, "tiny image", 5)

	msg := refusal(t, "request-phase deny", callTool(t, cs, "everything__echo", map[string]any{"message": "hi"}), -32001)
	if !strings.Contains(msg, "echo is not allowed here") || !strings.Contains(msg, "guardrails.processors[0]") {
		t.Fatalf("request-phase refusal %q", msg)
	}
	msg = refusal(t, "response-phase deny", callTool(t, cs, "everything__get-sum", map[string]any{"a": 2, "b": 3}), -32003)
	if !strings.Contains(msg, "sum quota used up") || !strings.Contains(msg, "guardrails.processors[1]") || strings.Contains(msg, "is 5") {
		t.Fatalf("response-phase refusal %q", msg)
	}
	refusal(t, "mcp_error override", callTool(t, cs, "everything__get-tiny-image", map[string]any{}), -32042)
	// The first denial short-circuits: the later processors never saw echo.
	if strings.Contains(override.Logs.String(), "tool=echo") {
		t.Fatalf("processor 2 was asked about echo after processor 0 denied it:\n%s", override.Logs)
	}
	noPanic(t, logs.String())
}

func TestGuardrailsMethodPrecedence(t *testing.T) {
	t.Parallel()
	// This processor denies echo calls and drops echo from listings
	// whenever it is asked; the methods maps decide when it is asked.
	deny := startProcessor(t, "-deny", "echo")

	// Exact beats prefix beats "*": tools/call is checked (request), tools/list
	// bypasses (tools/* off) although "*" says full.
	cs1, logs1 := startGuarded(t, guardProc(deny.Addr, map[string]string{"*": "full", "tools/*": "off", "tools/call": "request"}))
	if got := search(t, cs1, "echo a message back", 5); !slices.Contains(got, "everything__echo") {
		t.Fatalf("tools/* off: search = %v, want echo listed", got)
	}
	refusal(t, "exact tools/call request", callTool(t, cs1, "everything__echo", map[string]any{"message": "hi"}), -32001)

	// A prefix key and a suffix key both beat "*": neither processor is asked.
	cs2, logs2 := startGuarded(t,
		guardProc(deny.Addr, map[string]string{"*": "full", "tools/*": "off"}),
		guardProc(deny.Addr, map[string]string{"*": "full", "*/call": "off", "*/list": "off"}),
	)
	if got := search(t, cs2, "echo a message back", 5); !slices.Contains(got, "everything__echo") {
		t.Fatalf("search = %v, want echo listed", got)
	}
	wantOK(t, "wildcards beat *", callTool(t, cs2, "everything__echo", map[string]any{"message": "precedence"}), "precedence")

	// "*" alone: the listing is filtered and the gate then refuses the call.
	cs3, logs3 := startGuarded(t, guardProc(deny.Addr, map[string]string{"*": "full"}))
	if got := search(t, cs3, "echo a message back", 5); slices.Contains(got, "everything__echo") {
		t.Fatalf("* full: search = %v, want echo dropped", got)
	}
	for _, l := range []*syncBuffer{logs1, logs2, logs3} {
		noPanic(t, l.String())
	}
}

func TestGuardrailsFailureModes(t *testing.T) {
	t.Parallel()
	proc := startProcessor(t)
	methods := map[string]string{"tools/call": "request"}
	closed, closedLogs := startGuarded(t, guardProc(proc.Addr, methods, "timeout", "500ms"))
	open, openLogs := startGuarded(t, guardProc(proc.Addr, methods, "failureMode", "failOpen", "timeout", "500ms"))
	for _, cs := range []*mcp.ClientSession{closed, open} {
		search(t, cs, "echo a message back", 5)
		wantOK(t, "processor up", callTool(t, cs, "everything__echo", map[string]any{"message": "up"}), "up")
	}

	proc.Stop()
	start := time.Now()
	msg := refusal(t, "failClosed, processor stopped", callTool(t, closed, "everything__echo", map[string]any{"message": "down"}), -32603)
	if !strings.Contains(msg, "could not be reached") {
		t.Fatalf("failClosed refusal %q", msg)
	}
	wantOK(t, "failOpen, processor stopped", callTool(t, open, "everything__echo", map[string]any{"message": "down"}), "down")
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("two calls against a stopped processor took %v", el)
	}
	if !waitFor(5*time.Second, func() bool { return strings.Contains(openLogs.String(), "failOpen") }) {
		t.Fatalf("failOpen allowed without logging it:\n%s", openLogs)
	}
	noPanic(t, closedLogs.String())
	noPanic(t, openLogs.String())
}

func TestGuardrailsTimeout(t *testing.T) {
	t.Parallel()
	slow := startProcessor(t, "-delay", "3s")
	methods := map[string]string{"tools/call": "request"}
	closed, closedLogs := startGuarded(t, guardProc(slow.Addr, methods, "timeout", "200ms"))
	open, openLogs := startGuarded(t, guardProc(slow.Addr, methods, "timeout", "200ms", "failureMode", "failOpen"))
	search(t, closed, "echo a message back", 5)
	search(t, open, "echo a message back", 5)

	start := time.Now()
	msg := refusal(t, "failClosed timeout", callTool(t, closed, "everything__echo", map[string]any{"message": "slow"}), -32603)
	if !strings.Contains(msg, "did not answer in time") {
		t.Fatalf("timeout refusal %q", msg)
	}
	wantOK(t, "failOpen timeout", callTool(t, open, "everything__echo", map[string]any{"message": "slow"}), "slow")
	if el := time.Since(start); el > 2500*time.Millisecond {
		t.Fatalf("two calls with a 200ms processor timeout took %v (the processor sleeps 3s)", el)
	}
	noPanic(t, closedLogs.String())
	noPanic(t, openLogs.String())
}
