package netguard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestIsPrivate(t *testing.T) {
	for _, tt := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1", true}, {"127.255.255.254", true}, {"0.0.0.0", true}, {"0.1.2.3", true},
		{"::1", true}, {"::", true}, {"::ffff:127.0.0.1", true}, {"::ffff:10.1.2.3", true},
		{"::127.0.0.1", true}, {"64:ff9b::7f00:1", true}, {"2002:7f00:1::", true}, {"64:ff9b::a9fe:a9fe", true},
		{"10.0.0.1", true}, {"172.16.0.1", true}, {"172.31.255.255", true}, {"192.168.1.1", true},
		{"169.254.169.254", true}, {"fe80::1", true}, {"fe80::1%lo", true}, {"fd00::1", true}, {"fc00::1", true},
		{"100.64.0.1", true}, {"100.127.255.255", true}, {"224.0.0.1", true}, {"255.255.255.255", true},
		{"ff02::1", true},
		{"8.8.8.8", false}, {"1.1.1.1", false}, {"172.32.0.1", false}, {"100.128.0.1", false},
		{"2606:4700::1111", false}, {"::ffff:8.8.8.8", false}, {"64:ff9b::808:808", false}, {"2002:808:808::", false},
		{"172.15.255.255", false}, {"169.253.0.1", false}, {"11.0.0.1", false},
	} {
		if got := IsPrivate(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("IsPrivate(%s) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}

func TestCheckHost(t *testing.T) {
	refused := []string{
		"::1%lo", "fe80::1%eth0", "::1%25lo",
		"2130706433", "127.1", "127.0.1", "0x7f.0.0.1", "0X7F.1", "0177.0.0.1", "0x7f000001", "017700000001",
		"010.0.0.1", "1.2.3.4.5", "a.b.c.1", "0x7f",
	}
	for _, h := range refused {
		if err := CheckHost(h); err == nil {
			t.Errorf("CheckHost(%q) = nil, want a refusal", h)
		}
	}
	admitted := []string{"127.0.0.1", "127.0.0.1.", "10.1.2.3", "::1", "::ffff:127.0.0.1", "localhost", "example.com",
		"github.com.", "cafe", "deadbeef.example", "0x.example", "123.example.com", "xn--bcher-kva.example"}
	for _, h := range admitted {
		if err := CheckHost(h); err != nil {
			t.Errorf("CheckHost(%q) = %v, want nil", h, err)
		}
	}
}

// TestControlRefusesTheDial proves the hook stops the connection itself:
// a real loopback listener sees no connection for a refused dial, and one
// for an admitted dial.
func TestControlRefusesTheDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	srv := &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) }),
		ConnState: func(_ net.Conn, s http.ConnState) { accepted.Add(map[bool]int64{true: 1}[s == http.StateNew]) },
	}
	go srv.Serve(ln)
	defer srv.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	get := func(check Check, host string) error {
		tr := &http.Transport{DialContext: Dialer(&net.Dialer{Timeout: 5 * time.Second}, check).DialContext}
		defer tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/", nil)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, host := range []string{"127.0.0.1", "localhost", "0.0.0.0", "::ffff:127.0.0.1"} {
		err := get(DenyPrivate, host)
		var r *RefusedError
		if !errors.As(err, &r) || !errors.Is(err, ErrPrivate) {
			t.Errorf("%s: want a RefusedError for a private address, got %v", host, err)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the listener accepted %d connection(s) the hook refused", n)
	}
	if err := get(func(netip.AddrPort) error { return nil }, "127.0.0.1"); err != nil {
		t.Fatalf("admitted dial: %v", err)
	}
	if accepted.Load() != 1 {
		t.Fatal("the admitted dial did not reach the listener")
	}
	// Chain stops at the first refusal.
	calls := 0
	c := Chain(nil, func(netip.AddrPort) error { calls++; return errors.New("first") }, func(netip.AddrPort) error { calls++; return nil })
	if err := c(netip.MustParseAddrPort("1.2.3.4:80")); err == nil || !strings.Contains(err.Error(), "first") || calls != 1 {
		t.Fatalf("Chain: err %v calls %d", err, calls)
	}
	if Chain(nil, nil) != nil {
		t.Fatal("Chain of nothing is not nil")
	}
}
