package passthrough

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/upstream"
)

type serverResources struct {
	server    string
	resources []*mcp.Resource
	templates []*mcp.ResourceTemplate
}

func (p *Relay) ListResources(ctx context.Context, req *mcp.ListResourcesRequest, next mcp.MethodHandler, method string) (mcp.Result, error) {
	own, err := next(ctx, method, req)
	if err != nil {
		return nil, err
	}
	ss, _ := req.GetSession().(*mcp.ServerSession)
	lists := fanOut(ctx, p, ss, p.upstreams(ctx, hasResources), func(ctx context.Context, server string, cs *mcp.ClientSession) (serverResources, error) {
		var out []*mcp.Resource
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				return serverResources{}, err
			}
			out = append(out, r)
		}
		return serverResources{server: server, resources: out}, nil
	})
	res := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}}
	if o, _ := own.(*mcp.ListResourcesResult); o != nil {
		for _, r := range o.Resources {
			if r.URI != PlaceholderResource {
				res.Resources = append(res.Resources, r)
			}
		}
	}
	count := map[string]int{}
	for _, l := range lists {
		for _, r := range l.resources {
			count[r.URI]++
		}
	}
	owners := map[string]string{}
	for _, l := range lists {
		for _, r := range l.resources {
			c := *r
			if count[r.URI] > 1 || strings.HasPrefix(r.URI, URIPrefix) {
				c.URI = URIPrefix + l.server + "/" + r.URI
			} else {
				owners[r.URI] = l.server
			}
			res.Resources = append(res.Resources, &c)
		}
	}
	p.mu.Lock()
	for k, v := range owners {
		p.owners[k] = v
	}
	p.mu.Unlock()
	return res, nil
}

func (p *Relay) ListTemplates(ctx context.Context, req *mcp.ListResourceTemplatesRequest, next mcp.MethodHandler, method string) (mcp.Result, error) {
	own, err := next(ctx, method, req)
	if err != nil {
		return nil, err
	}
	ss, _ := req.GetSession().(*mcp.ServerSession)
	lists := fanOut(ctx, p, ss, p.upstreams(ctx, hasResources), func(ctx context.Context, server string, cs *mcp.ClientSession) (serverResources, error) {
		var out []*mcp.ResourceTemplate
		for r, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				return serverResources{}, err
			}
			out = append(out, r)
		}
		return serverResources{server: server, templates: out}, nil
	})
	res := &mcp.ListResourceTemplatesResult{ResourceTemplates: []*mcp.ResourceTemplate{}}
	if o, _ := own.(*mcp.ListResourceTemplatesResult); o != nil {
		res.ResourceTemplates = append(res.ResourceTemplates, o.ResourceTemplates...)
	}
	count := map[string]int{}
	for _, l := range lists {
		for _, t := range l.templates {
			count[t.URITemplate]++
		}
	}
	prefixes := map[string]string{}
	for _, l := range lists {
		for _, t := range l.templates {
			c := *t
			if count[t.URITemplate] > 1 {
				c.URITemplate = URIPrefix + l.server + "/" + t.URITemplate
			} else if lit, _, _ := strings.Cut(t.URITemplate, "{"); lit != "" {
				prefixes[lit] = l.server
			}
			res.ResourceTemplates = append(res.ResourceTemplates, &c)
		}
	}
	p.mu.Lock()
	for k, v := range prefixes {
		p.prefixes[k] = v
	}
	p.mu.Unlock()
	return res, nil
}

// owner finds the upstream serving an exposed resource URI and the URI it
// knows it by: a toolgate:// prefix names it; else the last list did; else
// the longest literal prefix of a listed template; else, with one
// resource server, that one. Otherwise "" (the caller tries each).
func (p *Relay) owner(uri string) (server, original string) {
	if rest, ok := strings.CutPrefix(uri, URIPrefix); ok {
		if s, orig, ok := strings.Cut(rest, "/"); ok {
			if _, known := p.host.Upstream(s); known {
				return s, orig
			}
		}
	}
	if p.bare != "" {
		return p.bare, uri
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.owners[uri]; ok {
		return s, uri
	}
	best := ""
	for lit, s := range p.prefixes {
		if strings.HasPrefix(uri, lit) && len(lit) > len(best) {
			best, server = lit, s
		}
	}
	return server, uri
}

// onResource runs f against the upstream owning uri, or, when that is not
// known, against each resource server in name order until one answers.
func onResource[T any](ctx context.Context, p *Relay, ss *mcp.ServerSession, uri string, f func(context.Context, *mcp.ClientSession, string) (T, error)) (T, error) {
	server, orig := p.owner(uri)
	var candidates []*upstream.Server
	if server != "" {
		if srv, ok := p.host.Upstream(server); ok && p.admit(ctx, server) == nil {
			candidates = append(candidates, srv)
		}
	} else {
		candidates = p.upstreams(ctx, hasResources)
	}
	var zero T
	var first error
	for _, srv := range candidates {
		var res T
		err := p.with(ctx, srv, ss, func(cs *mcp.ClientSession) (err error) {
			res, err = f(ctx, cs, orig)
			return err
		})
		if err == nil {
			return res, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		return zero, mcp.ResourceNotFoundError(uri)
	}
	return zero, relayErr(first)
}

func (p *Relay) ReadResource(ctx context.Context, req *mcp.ReadResourceRequest) (mcp.Result, error) {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	uri := req.Params.URI
	res, err := onResource(ctx, p, ss, uri, func(ctx context.Context, cs *mcp.ClientSession, orig string) (*mcp.ReadResourceResult, error) {
		params := *req.Params
		params.URI = orig
		params.Meta = p.RelayMeta(ctx, req.Params.Meta, ss)
		defer p.DropProgress(params.Meta)
		return cs.ReadResource(ctx, &params)
	})
	if err != nil {
		return nil, err
	}
	for _, c := range res.Contents {
		if c != nil && c.URI != uri {
			if _, orig := p.owner(uri); c.URI == orig {
				c.URI = uri
			}
		}
	}
	return res, nil
}

func (p *Relay) Subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	ss := req.Session
	_, err := onResource(ctx, p, ss, req.Params.URI, func(ctx context.Context, cs *mcp.ClientSession, orig string) (struct{}, error) {
		return struct{}{}, cs.Subscribe(ctx, &mcp.SubscribeParams{URI: orig})
	})
	if err == nil {
		p.mu.Lock()
		if p.subs[req.Params.URI] == nil {
			p.subs[req.Params.URI] = map[*mcp.ServerSession]bool{}
		}
		p.subs[req.Params.URI][ss] = true
		p.mu.Unlock()
	}
	return err
}

// Unsubscribe forwards an unsubscribe once no client session is
// subscribed to the URI any more (the upstream subscription is shared).
func (p *Relay) Unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	p.mu.Lock()
	delete(p.subs[req.Params.URI], req.Session)
	last := len(p.subs[req.Params.URI]) == 0
	p.mu.Unlock()
	if !last {
		return nil
	}
	_, err := onResource(ctx, p, req.Session, req.Params.URI, func(ctx context.Context, cs *mcp.ClientSession, orig string) (struct{}, error) {
		return struct{}{}, cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: orig})
	})
	return err
}
