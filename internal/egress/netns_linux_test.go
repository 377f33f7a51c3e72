package egress

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary act as a "server" that reports what the
// network lets it do, for the enforce tests.
const childEnv = "EGRESS_TEST_CHILD"

func TestMain(m *testing.M) {
	if what := os.Getenv(childEnv); what != "" {
		os.Exit(child(what))
	}
	os.Exit(m.Run())
}

// child dials a raw TCP address, then fetches a URL through HTTP_PROXY,
// printing one line for each.
func child(what string) int {
	raw, fetch, _ := strings.Cut(what, " ")
	if raw == "hold" {
		// Connect directly and keep the connection until stdin closes.
		c, err := net.Dial("tcp", fetch)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Println("connected")
		io.Copy(io.Discard, os.Stdin)
		c.Close()
		return 0
	}
	fmt.Printf("argv0: %s\n", os.Args[0])
	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(l, "CapEff:") || strings.HasPrefix(l, "CapAmb:") {
				fmt.Println(strings.Join(strings.Fields(l), " "))
			}
		}
	}
	c, err := net.DialTimeout("tcp", raw, 2*time.Second)
	if err != nil {
		fmt.Printf("raw: %v\n", err)
	} else {
		c.Close()
		fmt.Println("raw: connected")
	}
	proxy, err := url.Parse(os.Getenv("HTTP_PROXY"))
	if err != nil || proxy.Host == "" {
		fmt.Printf("fetch: no proxy (%q)\n", os.Getenv("HTTP_PROXY"))
		return 0
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}, Timeout: 5 * time.Second}
	resp, err := hc.Get(fetch)
	if err != nil {
		fmt.Printf("fetch: %v\n", err)
		return 0
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("fetch: %d %s\n", resp.StatusCode, strings.TrimSpace(string(body)))
	return 0
}

func needNamespaces(t *testing.T) {
	t.Helper()
	if err := Probe(); err != nil {
		t.Skipf("enforce mode cannot run here: %v", err)
	}
}

// TestIsolateEnforces runs a child in enforce mode: a raw connection to a
// listener on the host's loopback fails (the namespace has no route out),
// while a fetch through the proxy reaches an allowed host and is refused
// for another.
func TestIsolateEnforces(t *testing.T) {
	needNamespaces(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "backend says hi")
	}))
	defer backend.Close()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		for {
			c, err := raw.Accept()
			if err != nil {
				return
			}
			c.Close()
			accepted <- struct{}{}
		}
	}()
	rules, err := ParseRules([]string{backend.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	p := New(Options{Server: "srv", Mode: ModeEnforce, Rules: rules, Report: ev.add})
	defer p.Close()

	run := func(fetch string) string {
		t.Helper()
		exe, _ := os.Executable()
		cmd := exec.Command(exe)
		cmd.Args[0] = "renamed-server" // argv[0] reaches the server as given
		// GORACE: a race-enabled binary otherwise sleeps a second at exit.
		cmd.Env = append(os.Environ(), childEnv+"="+raw.Addr().String()+" "+fetch, "GORACE=atexit_sleep_ms=0")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		var out, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &stderr
		iso, err := Isolate(cmd)
		if err != nil {
			t.Fatal(err)
		}
		defer iso.Close()
		if err := cmd.Start(); err != nil {
			t.Fatal(iso.StartError(err))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := iso.Listener(ctx)
		if err != nil {
			cmd.Wait()
			t.Fatalf("%v (stderr %q)", err, stderr.String())
		}
		go p.Serve(l)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child: %v (stderr %q)", err, stderr.String())
		}
		l.Close()
		return out.String()
	}

	out := run(backend.URL + "/")
	if !strings.Contains(out, "argv0: renamed-server\n") {
		t.Errorf("the server's argv[0]: %q", out)
	}
	if os.Geteuid() != 0 && (!strings.Contains(out, "CapEff: 0000000000000000") || !strings.Contains(out, "CapAmb: 0000000000000000")) {
		// The helper's CAP_NET_ADMIN must not reach the server.
		t.Errorf("the unprivileged server kept capabilities: %q", out)
	}
	// 127.0.0.1 in the namespace is the namespace's own loopback, where
	// nothing but the proxy listens.
	if !strings.Contains(out, "raw: dial tcp "+raw.Addr().String()+": connect: connection refused") {
		t.Errorf("raw connection from the namespace: %q, want connection refused", out)
	}
	if !strings.Contains(out, "fetch: 200 backend says hi") {
		t.Errorf("allowed fetch through the proxy: %q", out)
	}
	select {
	case <-accepted:
		t.Error("the raw listener accepted a connection from the namespace")
	default:
	}
	if e := ev.last(t); e.Decision != Allow || e.Mode != ModeEnforce {
		t.Errorf("event %+v", e)
	}

	out = run("http://localhost:" + fmt.Sprint(backend.Listener.Addr().(*net.TCPAddr).Port) + "/")
	if !strings.Contains(out, "fetch: 403 toolgate egress: connection to localhost:") {
		t.Errorf("denied fetch: %q", out)
	}
	if e := ev.last(t); e.Decision != Block {
		t.Errorf("event %+v", e)
	}
}

// TestIsolateUnprivileged runs TestIsolateEnforces as an unprivileged user
// (uid 65534), so the user-namespace path is tested wherever the tests run
// as root; run as non-root, TestIsolateEnforces takes that path itself.
func TestIsolateUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: TestIsolateEnforces covers the user-namespace path")
	}
	needNamespaces(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The test's temporary folders are private to root; uid 65534 needs
	// to reach the copy of the binary.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := dir + "/egress.test"
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^TestIsolateEnforces$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "GORACE=atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	switch {
	case strings.Contains(string(out), "--- SKIP: TestIsolateEnforces"):
		t.Skipf("the kernel refuses unprivileged user namespaces here:\n%s", out)
	case err != nil || !strings.Contains(string(out), "--- PASS: TestIsolateEnforces"):
		t.Fatalf("as uid 65534: %v\n%s", err, out)
	}
}

// TestIsolateHelperFailure: a command that cannot be run fails the start
// with the helper's message, not a hang.
func TestIsolateHelperFailure(t *testing.T) {
	needNamespaces(t)
	cmd := exec.Command("/bin/sh")
	cmd.Path = "/nonexistent/server"
	var stderr strings.Builder
	cmd.Stderr = &stderr
	iso, err := Isolate(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer iso.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := iso.Listener(ctx)
	if err != nil {
		t.Fatalf("the helper hands over the socket before exec: %v", err)
	}
	l.Close()
	werr := cmd.Wait()
	if werr == nil || !strings.Contains(stderr.String(), "exec /nonexistent/server") {
		t.Fatalf("wait %v, stderr %q", werr, stderr.String())
	}
}

// BenchmarkStart measures what enforce mode adds to starting a server:
// the same short-lived command started plainly and through the namespace
// helper (a new network namespace, lo up, the socket handoff, one exec of
// this binary). Run without -race: a race-enabled helper starts slower.
func BenchmarkStart(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true(1)")
	}
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command(truePath)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("enforce", func(b *testing.B) {
		if err := Probe(); err != nil {
			b.Skipf("enforce mode cannot run here: %v", err)
		}
		for b.Loop() {
			cmd := exec.Command(truePath)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			iso, err := Isolate(cmd)
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(iso.StartError(err))
			}
			l, err := iso.Listener(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				b.Fatal(err)
			}
			l.Close()
			iso.Close()
		}
	})
}
