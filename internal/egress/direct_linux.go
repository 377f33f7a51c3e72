package egress

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DirectInterval is how often WatchDirect looks at a monitor-mode server's
// sockets.
const DirectInterval = 200 * time.Millisecond

// maxTracked bounds the sockets WatchDirect remembers between looks.
const maxTracked = 4096

// WatchDirect reports, until done is closed, the TCP connections that the
// processes of group pgid hold to anything but the proxy (proxy): a
// monitor-mode server that ignores the proxy variables. It is a sampler,
// not an interceptor: it looks at the group's sockets every interval (in
// /proc), so it sees a connection only if it is still open at a look, and
// it cannot stop it. Such a connection is reported once, as Alert.
func (p *Proxy) WatchDirect(pgid int, proxy netip.AddrPort, interval time.Duration, done <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	seen := map[uint64]bool{}
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		conns := groupConns(pgid)
		next := make(map[uint64]bool, len(conns))
		for inode, c := range conns {
			if c.remote == proxy || c.remote.Addr().Unmap() == proxy.Addr() && c.remote.Port() == proxy.Port() {
				continue
			}
			if len(next) >= maxTracked {
				break
			}
			next[inode] = true
			if seen[inode] {
				continue
			}
			p.direct(c.remote)
		}
		seen = next
	}
}

// Alert is the decision of a connection seen but not decided on: a
// monitor-mode server connecting directly.
const Alert = "alert"

func (p *Proxy) direct(remote netip.AddrPort) {
	a := remote.Addr().Unmap()
	t := Target{Host: a.String(), Addr: a, Port: remote.Port()}
	listed := "not on the allow list"
	if p.opts.Rules.Admit(t) && p.opts.Rules.CheckAddr(netip.AddrPortFrom(a, remote.Port())) == nil {
		listed = "on the allow list"
	}
	p.directs.Add(1)
	ev := Event{
		Host: t.Host, Port: t.Port, Addr: netip.AddrPortFrom(a, remote.Port()).String(), Method: "direct", Decision: Alert,
		Reason: fmt.Sprintf("direct connection to %s, not through the egress proxy (%s; monitor mode does not stop it)", t, listed),
	}
	if !p.limiter.Allow() {
		p.unreported.Add(1)
		return
	}
	p.log.Warn("egress: server connected directly, bypassing its proxy", "target", t.String(), "listed", listed == "on the allow list")
	p.report(ev)
}

type sockConn struct {
	remote netip.AddrPort
}

// groupConns returns the connected TCP sockets held by the processes of
// group pgid, by inode.
func groupConns(pgid int) map[uint64]sockConn {
	inodes := map[uint64]bool{}
	var netPid string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if pgrpOf(e.Name()) != pgid {
			continue
		}
		netPid = e.Name()
		fds, _ := os.ReadDir(filepath.Join("/proc", e.Name(), "fd"))
		for _, fd := range fds {
			l, err := os.Readlink(filepath.Join("/proc", e.Name(), "fd", fd.Name()))
			if err != nil || !strings.HasPrefix(l, "socket:[") {
				continue
			}
			if n, err := strconv.ParseUint(strings.TrimSuffix(l[len("socket:["):], "]"), 10, 64); err == nil {
				inodes[n] = true
			}
		}
	}
	out := map[uint64]sockConn{}
	if len(inodes) == 0 {
		return out
	}
	for _, f := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(filepath.Join("/proc", netPid, "net", f))
		if err != nil {
			continue
		}
		for inode, c := range parseProcNet(data) {
			if inodes[inode] {
				out[inode] = c
			}
		}
	}
	return out
}

// pgrpOf reads the process group of a /proc entry (0 if it is gone).
func pgrpOf(pid string) int {
	st, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(st, ')')
	if i < 0 {
		return 0
	}
	// After the command: state, ppid, pgrp.
	f := strings.Fields(string(st[i+1:]))
	if len(f) < 3 {
		return 0
	}
	n, _ := strconv.Atoi(f[2])
	return n
}

// TCP states of /proc/net/tcp that hold no peer.
const (
	tcpListen = 0x0A
	tcpClose  = 0x07
)

// parseProcNet reads /proc/net/tcp or tcp6: the sockets with a peer, by
// inode.
func parseProcNet(data []byte) map[uint64]sockConn {
	out := map[uint64]sockConn{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Scan() // header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		st, err := strconv.ParseUint(f[3], 16, 8)
		if err != nil || st == tcpListen || st == tcpClose {
			continue
		}
		remote, ok := parseHexAddr(f[2])
		if !ok || remote.Port() == 0 {
			continue
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil || inode == 0 {
			continue
		}
		out[inode] = sockConn{remote: remote}
	}
	return out
}

// parseHexAddr reads "0100007F:1F90" (IPv4) or 32 hex digits and a port
// (IPv6): the kernel prints the address as 32-bit words read in the host's
// byte order.
func parseHexAddr(s string) (netip.AddrPort, bool) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	b, err := hex.DecodeString(h)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return netip.AddrPort{}, false
	}
	for i := 0; i < len(b); i += 4 {
		binary.NativeEndian.PutUint32(b[i:], binary.BigEndian.Uint32(b[i:]))
	}
	a, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(a, uint16(port)), true
}
