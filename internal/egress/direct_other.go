//go:build !linux

package egress

import (
	"net/netip"
	"time"
)

// DirectInterval is how often WatchDirect would look.
const DirectInterval = 200 * time.Millisecond

// Alert is the decision of a connection seen but not decided on.
const Alert = "alert"

// WatchDirect sees nothing off Linux: there is no /proc to sample.
func (p *Proxy) WatchDirect(pgid int, proxy netip.AddrPort, interval time.Duration, done <-chan struct{}) {
}
