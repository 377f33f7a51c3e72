package gateway

import (
	"context"
	"encoding/json"
	"time"

	"github.com/toolgate/toolgate/extension"
)

// Servers loaded at run time (load_mcp_server) by replicas sharing state:
// each load is recorded in Redis and announced, and every other replica
// loads the same server the same way (through its own load filters), so
// the loading session finds and calls its tools whichever replica the
// balancer picks; a replica that starts later loads them all.

// sharedLoad is one recorded load.
type sharedLoad struct {
	URL       string    `json:"url"`
	Session   string    `json:"session,omitempty"`
	Principal string    `json:"principal,omitempty"`
	At        time.Time `json:"at"`
}

func (g *Gateway) loadsKey() string     { return g.shared.Key("loaded") }
func (g *Gateway) loadsChannel() string { return g.shared.Key("loaded", "changed") }

// shareLoad records a load this replica made and announces it. A failure
// is logged: the load itself succeeded here.
func (g *Gateway) shareLoad(ctx context.Context, req *extension.LoadRequest) {
	if g.shared == nil || ctx.Value(replayKey{}) != nil {
		return
	}
	b, _ := json.Marshal(sharedLoad{URL: req.URL, Session: req.Session, Principal: req.Principal, At: time.Now().UTC()})
	c := g.shared.Client
	if err := c.HSet(ctx, g.loadsKey(), req.ServerName, b).Err(); err != nil {
		g.log.Warn("run-time load not shared with the other replicas", "server", req.ServerName, "error", g.shared.Err(err))
		return
	}
	_ = c.Publish(ctx, g.loadsChannel(), req.ServerName).Err()
}

// replayKey marks, in a load's context, a load repeated from another
// replica's record: it is not recorded again.
type replayKey struct{}

// followLoads loads what the other replicas loaded, now and whenever one
// announces a load, until the gateway closes.
func (g *Gateway) followLoads() {
	if g.shared == nil {
		return
	}
	sub := g.shared.Client.Subscribe(g.ctx, g.loadsChannel())
	go func() {
		defer sub.Close()
		g.replayLoads("")
		ch := sub.Channel()
		for {
			select {
			case <-g.ctx.Done():
				return
			case m, ok := <-ch:
				if !ok {
					return
				}
				g.replayLoads(m.Payload)
			}
		}
	}()
}

// replayLoads loads server (every recorded one for "") unless this
// replica has it.
func (g *Gateway) replayLoads(server string) {
	ctx, cancel := context.WithTimeout(g.ctx, 30*time.Second)
	defer cancel()
	recs := map[string]string{}
	if server == "" {
		all, err := g.shared.Client.HGetAll(ctx, g.loadsKey()).Result()
		if err != nil {
			g.log.Warn("run-time loads of the other replicas not read", "error", g.shared.Err(err))
			return
		}
		recs = all
	} else if v, err := g.shared.Client.HGet(ctx, g.loadsKey(), server).Result(); err == nil {
		recs[server] = v
	}
	for name, raw := range recs {
		if _, have := g.ups.Get(name); have {
			continue
		}
		var l sharedLoad
		if json.Unmarshal([]byte(raw), &l) != nil {
			continue
		}
		// The load filters run again here, on what the record keeps (the
		// principal's id, not its groups).
		ctx := context.WithValue(ctx, replayKey{}, true)
		if _, err := g.Load(ctx, &extension.LoadRequest{ServerName: name, URL: l.URL, Session: l.Session, Principal: l.Principal}); err != nil {
			g.log.Warn("run-time load of another replica not repeated here", "server", name, "error", g.redactString(err.Error()))
		}
	}
}
