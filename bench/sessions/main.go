// Command sessions measures what unauthenticated HTTP clients can make a
// gateway hold: it starts `toolgate serve --listen` with no upstreams,
// opens -n stateful sessions (one initialize each, never closed) with
// -c concurrent clients, and prints the gateway's peak RSS (VmHWM), its
// RSS and goroutines afterwards, and how many sessions are still open.
//
//	go run ./bench/sessions [-n 10000] [-c 16] [-bin PATH]
//
// Run it from the repository root (it builds ./cmd/toolgate unless -bin
// names a binary). Linux only: it reads /proc.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`

func main() {
	n := flag.Int("n", 10000, "session attempts")
	c := flag.Int("c", 16, "concurrent clients")
	bin := flag.String("bin", "", "toolgate binary to measure (default: build ./cmd/toolgate)")
	flag.Parse()
	if err := run(*n, *c, *bin); err != nil {
		log.Fatal(err)
	}
}

func run(n, conc int, bin string) error {
	tmp, err := os.MkdirTemp("", "toolgate-bench-sessions-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if bin == "" {
		bin = filepath.Join(tmp, "toolgate")
		build := exec.Command("go", "build", "-o", bin, "./cmd/toolgate")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build toolgate (run from the repo root): %w", err)
		}
	}
	cfg := filepath.Join(tmp, "config.json")
	if err := os.WriteFile(cfg, []byte(`{"search":{"mode":"lexical"},"mcpServers":{}}`), 0o600); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	gw := exec.Command(bin, "serve", "--config", cfg, "--state-dir", filepath.Join(tmp, "state"), "--listen", addr, "--log-level", "error")
	gw.Stderr = os.Stderr
	if err := gw.Start(); err != nil {
		return err
	}
	defer gw.Process.Kill()
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if i > 600 {
			return fmt.Errorf("toolgate did not listen on %s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	base := "http://" + addr
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	var next, opened, refused atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(initBody))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := client.Do(req)
				if err != nil {
					refused.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.Header.Get("Mcp-Session-Id") != "" {
					opened.Add(1)
				} else {
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	time.Sleep(500 * time.Millisecond) // let evictions finish
	hwm, rss := procMem(gw.Process.Pid)
	gor, open := statusFigures(base)
	fmt.Printf("%d session attempts (%d concurrent) in %s: %d opened, %d refused\n", n, conc, elapsed.Round(time.Millisecond), opened.Load(), refused.Load())
	fmt.Printf("peak RSS (VmHWM) %s, RSS after %s, goroutines after %d, sessions still open %s\n", hwm, rss, gor, open)
	return nil
}

func procMem(pid int) (hwm, rss string) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?", "?"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		switch k {
		case "VmHWM":
			hwm = strings.TrimSpace(v)
		case "VmRSS":
			rss = strings.TrimSpace(v)
		}
	}
	return hwm, rss
}

// statusFigures reads the goroutine count from /status and the open
// sessions from /metrics (absent on gateways without the session cap).
func statusFigures(base string) (int, string) {
	var st struct {
		Goroutines int `json:"goroutines"`
	}
	if resp, err := http.Get(base + "/status"); err == nil {
		json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
	}
	open := "n/a"
	if resp, err := http.Get(base + "/metrics"); err == nil {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "toolgate_http_sessions "); ok {
				open = v
			}
		}
		resp.Body.Close()
	}
	return st.Goroutines, open
}
