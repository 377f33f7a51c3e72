package oauthclient

import (
	"context"
	"fmt"
	"html"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/internal/config"
)

// LoginOptions are what Login needs beyond the server.
type LoginOptions struct {
	// Show is given the authorization URL for the user to open (print it,
	// open a browser). Required.
	Show func(authURL string)
	// HTTPClient reaches the server, the metadata, the registration and
	// token endpoints (default: a client with a 30 s timeout).
	HTTPClient *http.Client
	// Version is toolgate's version, sent as the client's.
	Version string
}

// LoginResult says what a login did, without any secret.
type LoginResult struct {
	ClientID   string
	Registered bool
	Scopes     []string
	Expiry     time.Time
	Refresh    bool // a refresh token was granted
	Tools      int  // the tools the server lists with the new token
}

// Login runs the MCP authorization flow for srv (a remote server) and
// saves the credential in store: it connects without a token, and on the
// server's 401 the SDK's authorization code handler finds the
// authorization server (protected resource metadata, then authorization
// server metadata), registers a client dynamically unless srv.OAuth names
// one, sends the user to the authorization URL with PKCE and the resource
// indicator, receives the code on a loopback redirect, and exchanges it.
// The new token then lists the server's tools, to prove it works.
func Login(ctx context.Context, srv *config.Server, store *Store, opts LoginOptions) (*LoginResult, error) {
	if !srv.IsRemote() {
		return nil, fmt.Errorf("server %q is not a remote (url) server; only those log in with OAuth", srv.Name)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	oc := srv.OAuth
	if oc == nil {
		oc = &config.OAuthClient{}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(oc.RedirectPort)))
	if err != nil {
		return nil, fmt.Errorf("login to %q: the loopback redirect listener: %v", srv.Name, err)
	}
	redirect := "http://" + ln.Addr().String() + "/callback"
	codes := make(chan *sdkauth.AuthorizationResult, 1)
	errs := make(chan error, 1)
	hs := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: callbackHandler(codes, errs)}
	go hs.Serve(ln)
	defer hs.Close()

	var (
		mu       sync.Mutex
		captured *oauth2.Config
		token    *oauth2.Token
	)
	cfg := &sdkauth.AuthorizationCodeHandlerConfig{
		RedirectURL: redirect,
		DynamicClientRegistrationConfig: &sdkauth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs:            []string{redirect},
			ClientName:              "toolgate",
			GrantTypes:              []string{"authorization_code", "refresh_token"},
			ResponseTypes:           []string{"code"},
			TokenEndpointAuthMethod: "none",
		}},
		AuthorizationCodeFetcher: func(ctx context.Context, args *sdkauth.AuthorizationArgs) (*sdkauth.AuthorizationResult, error) {
			opts.Show(args.URL)
			select {
			case r := <-codes:
				return r, nil
			case err := <-errs:
				return nil, err
			case <-ctx.Done():
				return nil, fmt.Errorf("no answer from the browser: %w", ctx.Err())
			}
		},
		RequestRefreshToken: true,
		Client:              opts.HTTPClient,
		NewTokenSource: func(ctx context.Context, c *oauth2.Config, t *oauth2.Token) (oauth2.TokenSource, error) {
			mu.Lock()
			captured, token = c, t
			mu.Unlock()
			return c.TokenSource(ctx, t), nil
		},
	}
	if oc.ClientID != "" {
		cfg.PreregisteredClient = &oauthex.ClientCredentials{ClientID: oc.ClientID}
		if oc.ClientSecret != "" {
			cfg.PreregisteredClient.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: oc.ClientSecret}
		}
	}
	if len(oc.Scopes) > 0 {
		scopes := oc.Scopes
		cfg.ScopeFilter = func([]string) []string { return scopes }
	}
	h, err := sdkauth.NewAuthorizationCodeHandler(cfg)
	if err != nil {
		return nil, fmt.Errorf("login to %q: %v", srv.Name, err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolgate", Version: opts.Version}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, OAuthHandler: h, HTTPClient: withHeaders(opts.HTTPClient, srv.Headers), MaxRetries: -1}, nil)
	if err != nil {
		return nil, fmt.Errorf("login to %q: %v", srv.Name, err)
	}
	defer cs.Close()
	mu.Lock()
	c, t := captured, token
	mu.Unlock()
	if c == nil || t == nil {
		return nil, fmt.Errorf("login to %q: the server let toolgate in without asking for a login; it needs no OAuth", srv.Name)
	}
	res := &LoginResult{ClientID: c.ClientID, Registered: oc.ClientID == "", Scopes: c.Scopes, Expiry: t.Expiry, Refresh: t.RefreshToken != ""}
	// The tools the server lists with the new token: proof that it works.
	for _, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("login to %q: listing tools with the new token: %v", srv.Name, err)
		}
		res.Tools++
	}
	err = store.Save(srv.Name, &Credential{
		ServerURL: srv.URL, Resource: srv.URL,
		ClientID: c.ClientID, ClientSecret: c.ClientSecret,
		AuthURL: c.Endpoint.AuthURL, TokenURL: c.Endpoint.TokenURL, AuthStyle: int(c.Endpoint.AuthStyle),
		Scopes: c.Scopes, Registered: res.Registered, Token: t, LoggedIn: time.Now().UTC(),
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// callbackHandler receives the authorization server's redirect.
func callbackHandler(codes chan<- *sdkauth.AuthorizationResult, errs chan<- error) http.Handler {
	var once sync.Once
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		if e := q.Get("error"); e != "" {
			once.Do(func() {
				errs <- fmt.Errorf("the authorization server refused: %s %s", e, q.Get("error_description"))
			})
			fmt.Fprintf(w, "<p>toolgate: the login failed: %s</p>", html.EscapeString(e))
			return
		}
		if q.Get("code") == "" {
			http.Error(w, "no code in the redirect", http.StatusBadRequest)
			return
		}
		sent := false
		once.Do(func() {
			codes <- &sdkauth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}
			sent = true
		})
		if !sent {
			http.Error(w, "this login already received its answer", http.StatusConflict)
			return
		}
		fmt.Fprint(w, "<p>toolgate: logged in. You can close this tab.</p>")
	})
}

// withHeaders returns c sending the server's configured headers too.
func withHeaders(c *http.Client, headers map[string]string) *http.Client {
	if len(headers) == 0 {
		return c
	}
	cc := *c
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cc.Transport = roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		for k, v := range headers {
			r.Header.Set(k, v)
		}
		return base.RoundTrip(r)
	})
	return &cc
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
