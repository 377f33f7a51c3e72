package egress

import (
	"bufio"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseProcNet(t *testing.T) {
	data := []byte(`  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:9575 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 432773 1
   1: 0100007F:D2F0 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 55 1
   2: 0100007F:D2F1 0100007F:1F91 06 00000000:00000000 00:00000000 00000000     0        0 0 1
   3: 00000000000000000000000001000000:D2F0 B80D0120000000000000000001000000:01BB 02 0 0 0 0 0 77 1
`)
	got := parseProcNet(data)
	want := map[uint64]string{55: "127.0.0.1:8080", 77: "[2001:db8::1]:443"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for inode, addr := range want {
		if got[inode].remote.String() != addr {
			t.Errorf("inode %d: %v, want %s", inode, got[inode].remote, addr)
		}
	}
}

// TestWatchDirect: a process that ignores the proxy and connects directly
// is reported once, as an alert saying whether the list names the target;
// a connection to the proxy itself is not.
func TestWatchDirect(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	rules, _ := ParseRules([]string{"api.example.test:443"})
	ev := &events{}
	p := New(Options{Server: "srv", Mode: ModeMonitor, Rules: rules, Report: ev.add})
	defer p.Close()

	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"=hold "+l.Addr().String(), "GORACE=atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "connected\n" {
		t.Fatalf("child: %q", line)
	}
	done := make(chan struct{})
	defer close(done)
	// The listener stands for the proxy in the second watcher: nothing
	// to report there.
	q := New(Options{Server: "srv", Mode: ModeMonitor, Report: func(e Event) { t.Errorf("connection to the proxy reported: %+v", e) }})
	go q.WatchDirect(cmd.Process.Pid, netip.MustParseAddrPort(l.Addr().String()), 10*time.Millisecond, done)
	go p.WatchDirect(cmd.Process.Pid, netip.MustParseAddrPort("127.0.0.1:1"), 10*time.Millisecond, done)
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats().Direct == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the direct connection was not seen")
		}
		waitABit()
	}
	waitABit()
	waitABit()
	if n := p.Stats().Direct; n != 1 {
		t.Fatalf("reported %d times, want once", n)
	}
	e := ev.last(t)
	port := l.Addr().(*net.TCPAddr).Port
	if e.Decision != Alert || e.Host != "127.0.0.1" || int(e.Port) != port || !strings.Contains(e.Reason, "not on the allow list") {
		t.Fatalf("event %+v", e)
	}
}

// BenchmarkGroupConns measures one look of the direct-connection sampler
// (every process's stat read, the group's descriptors and the netns's TCP
// tables), which monitor mode does every DirectInterval per server.
func BenchmarkGroupConns(b *testing.B) {
	pgid := syscall.Getpgrp()
	for b.Loop() {
		groupConns(pgid)
	}
}
