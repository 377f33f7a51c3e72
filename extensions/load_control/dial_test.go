package loadcontrol

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/netguard"
)

// loopbackDeny is the configuration of issue 14's reproduction: loopback
// denied by patterns alone.
func loopbackDeny(t testing.TB) *LoadControl {
	off := false
	l, err := FromConfig(Config{
		DenyURLPatterns:     []string{"http://127.0.0.1:*", "http://[::1]:*", "http://localhost:*"},
		DenyPrivateNetworks: &off,
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// bypasses are the hosts that reached loopback past loopbackDeny before
// the fix (issue 14 item 2).
var bypasses = []string{
	"[::1%25lo]", "[fe80::1%25lo]", "0.0.0.0", "[::]", "127.0.0.2", "127.1.2.3",
	"2130706433", "127.1", "0x7f.0.0.1", "0177.0.0.1", "0x7f000001", "127.0.1",
	"[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[0:0::1]", "LOCALHOST", "localhost.", "127.0.0.1.",
}

// TestLoopbackBypassesRefused: each bypass is refused either before any
// connection (the URL check) or at the dial, for every address the URL can
// reach.
func TestLoopbackBypassesRefused(t *testing.T) {
	l := loopbackDeny(t)
	filter := l.FilterLoad
	for _, h := range bypasses {
		raw := "http://" + h + ":8080/mcp"
		req := &extension.LoadRequest{ServerName: "x", URL: raw}
		if err := filter(context.Background(), req); err != nil {
			continue // refused before connecting
		}
		if len(req.DialChecks) == 0 {
			t.Errorf("%s: admitted with no dial check", raw)
			continue
		}
		for _, a := range dialled(t, raw) {
			if err := req.DialChecks[0](a); err == nil {
				t.Errorf("%s: the dial to %s is admitted", raw, a)
			}
		}
	}
}

func TestDenyPrivateNetworksSetting(t *testing.T) {
	for _, tt := range []struct {
		raw       string
		wantAllow bool
	}{
		{`{}`, false},
		{`{"deny_private_networks": true}`, false},
		{`{"deny_private_networks": false}`, true},
	} {
		e, err := New([]byte(tt.raw))
		if err != nil {
			t.Fatal(err)
		}
		req := &extension.LoadRequest{ServerName: "x", URL: "https://example.com/mcp"}
		if err := e.(extension.LoadFilter).FilterLoad(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if req.AllowPrivateNetworks != tt.wantAllow {
			t.Errorf("%s: AllowPrivateNetworks = %v, want %v", tt.raw, req.AllowPrivateNetworks, tt.wantAllow)
		}
	}
}

func TestCheckDial(t *testing.T) {
	l := loopbackDeny(t)
	for _, tt := range []struct {
		url, addr string
		denied    bool
	}{
		{"http://runsc:8080/", "127.0.0.1:8080", true},
		{"http://a.example:8080/", "127.9.9.9:8080", true},
		{"http://a.example:8080/", "[::1]:8080", true},
		{"http://a.example:8080/", "0.0.0.0:8080", true},
		{"http://a.example:8080/", "[::ffff:127.0.0.1]:8080", true},
		{"http://a.example:8080/", "93.184.216.34:8080", false},
		{"https://a.example/", "127.0.0.1:443", false}, // the patterns are for http only
	} {
		err := l.CheckDial(tt.url, netip.MustParseAddrPort(tt.addr))
		if (err != nil) != tt.denied {
			t.Errorf("CheckDial(%s, %s) = %v, want denied %v", tt.url, tt.addr, err, tt.denied)
		}
	}
}

// hermetic resolves from /etc/hosts only: no DNS traffic from tests.
var hermetic = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("no DNS in tests")
}}

var errStop = errors.New("recorded; not connecting")

// dialled returns every address net/http's client dials for a GET of raw,
// seen by a Control hook that records it and stops the connection.
func dialled(t testing.TB, raw string) []netip.AddrPort {
	var mu sync.Mutex
	var out []netip.AddrPort
	check := func(a netip.AddrPort) error {
		mu.Lock()
		out = append(out, a)
		mu.Unlock()
		return errStop
	}
	tr := &http.Transport{DialContext: netguard.Dialer(&net.Dialer{Resolver: hermetic, Timeout: 2 * time.Second}, check).DialContext}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil
	}
	if resp, err := (&http.Client{Transport: tr}).Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("%s: the request was not stopped by the hook", raw)
	}
	mu.Lock()
	defer mu.Unlock()
	return out
}

// FuzzMatcherVsDial is a differential test of the URL matcher against the
// HTTP client: for any host, it compares what load_control decided on the
// URL with the addresses net/http actually dials for it (seen by the same
// Control hook the gateway uses, from /etc/hosts or the literal; no DNS).
//   - When the matcher reads the host as an IP address, the client must dial
//     exactly that address: otherwise a pattern judges one host and the
//     connection goes to another.
//   - No dial to this host (loopback, 0.0.0.0, [::]) may pass both the URL
//     check and the dial check while loopback is denied.
//   - The dial check must not refuse an address the patterns do not cover,
//     for a URL the matcher admitted.
func FuzzMatcherVsDial(f *testing.F) {
	for _, h := range append(bypasses, "127.0.0.1", "[::1]", "localhost", "runsc", "vm", "example.com",
		"10.0.0.1", "93.184.216.34", "[2606:4700::1111]", "１２７.０.０.１", "ｌｏｃａｌｈｏｓｔ", "127.0.0.1%00", "[::1]:80") {
		f.Add(h)
	}
	l := loopbackDeny(f)
	f.Fuzz(func(t *testing.T, host string) {
		raw := "http://" + host + ":8080/mcp"
		u, err := url.Parse(raw)
		if err != nil || u.Port() != "8080" {
			return // the client would not get as far as dialling either
		}
		pre := l.Check("x", raw)
		tgt, terr := ParseTarget(raw)
		for _, a := range dialled(t, raw) {
			local := netguard.IsLocalHost(a.Addr())
			dial := l.CheckDial(raw, a)
			if pre == nil && dial == nil && local {
				t.Fatalf("%q: the dial to %s passes both checks", raw, a)
			}
			if pre == nil && !local && dial != nil {
				t.Fatalf("%q: the dial check refuses %s, which no pattern covers: %v", raw, a, dial)
			}
			if terr == nil && tgt.IP && pre == nil && !sameHost(tgt.Host, a.Addr()) {
				t.Fatalf("%q: the matcher saw address %s, the client dialled %s", raw, tgt.Host, a)
			}
		}
	})
}

// sameHost reports whether the matcher's address is the dialled one. The
// client dials an unspecified address of either family as the other
// when it has to ([::] goes to 0.0.0.0 without IPv6); both reach this host.
func sameHost(matched string, dialled netip.Addr) bool {
	m, err := netip.ParseAddr(matched)
	if err != nil {
		return false
	}
	d := dialled.Unmap().WithZone("")
	return m == d || m.IsUnspecified() && d.IsUnspecified()
}
