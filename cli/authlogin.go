package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/oauthclient"
)

func newAuthCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Log in to remote servers that need OAuth (login, status, logout)",
		Long: `toolgate logs in to a remote MCP server that needs OAuth the way the MCP
authorization spec describes: it finds the authorization server from the server's 401
and metadata, registers itself (dynamic client registration) unless the server's
"oauth" config names a client, and sends you to the authorization page (authorization
code with PKCE, a loopback redirect). The tokens are kept encrypted in the state
directory; a running gateway uses the new login from its next request and refreshes
the access token before it expires.`,
		Args: usageArgs(cobra.ArbitraryArgs),
		RunE: groupRun,
	}
	var c common
	var noBrowser bool
	var timeout time.Duration
	login := &cobra.Command{
		Use:   "login SERVER",
		Short: "Log in to a remote server with OAuth",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAuthLogin(cmd.Context(), &c, args[0], !noBrowser, timeout, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	c.registerState(login, "config file")
	login.Flags().BoolVar(&noBrowser, "no-browser", false, "only print the authorization URL; do not open a browser")
	login.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the login to complete")
	var sc common
	var asJSON bool
	status := &cobra.Command{
		Use:   "status",
		Short: "The stored logins: client, scopes, expiry (never the tokens)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAuthStatus(&sc, asJSON, cmd.OutOrStdout())
		},
	}
	status.Flags().StringVar(&sc.stateDir, "state-dir", "", "state directory (default ~/.local/state/toolgate)")
	status.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	var lc common
	logout := &cobra.Command{
		Use:   "logout SERVER",
		Short: "Forget a server's stored login",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := resolveStateDir(lc.stateDir)
			if err != nil {
				return err
			}
			store := oauthclient.OpenStore(dir)
			if _, err := store.Load(args[0]); errors.Is(err, oauthclient.ErrNoCredential) {
				return fmt.Errorf("auth logout: no login stored for %q", args[0])
			}
			if err := store.Delete(args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "logged out of %s\n", args[0])
			return nil
		},
	}
	logout.Flags().StringVar(&lc.stateDir, "state-dir", "", "state directory (default ~/.local/state/toolgate)")
	cmd.AddCommand(login, status, logout)
	return cmd
}

func runAuthLogin(ctx context.Context, c *common, name string, browser bool, timeout time.Duration, stdout, stderr io.Writer) error {
	path, err := config.Find(c.config)
	if err != nil {
		return err
	}
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	srv, ok := cfg.Servers[name]
	if !ok {
		names := make([]string, 0, len(cfg.Servers))
		for n := range cfg.Servers {
			names = append(names, n)
		}
		sort.Strings(names)
		return usageError{fmt.Errorf("auth login: no server %q in %s (have %s)", name, cfg.Path, strings.Join(names, ", "))}
	}
	dir, err := resolveStateDir(c.stateDir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := oauthclient.Login(ctx, srv, oauthclient.OpenStore(dir), oauthclient.LoginOptions{
		Version: buildVersion().Version,
		Show: func(u string) {
			fmt.Fprintf(stderr, "Open this URL to log in to %s:\n\n  %s\n\nWaiting for the authorization server to redirect back...\n", name, u)
			if browser {
				openBrowser(u)
			}
		},
	})
	if err != nil {
		return err
	}
	how := "pre-registered client " + res.ClientID
	if res.Registered {
		how = "registered client " + res.ClientID
	}
	refresh := "no refresh token: log in again when it expires"
	if res.Refresh {
		refresh = "refreshed automatically"
	}
	exp := "no expiry given"
	if !res.Expiry.IsZero() {
		exp = "access token expires " + res.Expiry.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(stdout, "logged in to %s (%s; scopes %q; %s, %s); it lists %d tools\n", name, how, strings.Join(res.Scopes, " "), exp, refresh, res.Tools)
	return nil
}

// openBrowser tries the desktop's URL opener; a headless machine has
// none, and the printed URL is enough.
func openBrowser(u string) {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", u)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", u)
	default:
		cmd = exec.Command("xdg-open", u)
	}
	if cmd.Start() == nil {
		go cmd.Wait()
	}
}

// authRow is one line of `toolgate auth status`.
type authRow struct {
	Server     string    `json:"server"`
	URL        string    `json:"url"`
	ClientID   string    `json:"client_id"`
	Registered bool      `json:"registered"`
	Scopes     []string  `json:"scopes"`
	Expiry     time.Time `json:"expiry,omitzero"`
	Refresh    bool      `json:"refresh_token"`
	LoggedIn   time.Time `json:"logged_in"`
	Error      string    `json:"error,omitempty"`
}

func runAuthStatus(c *common, asJSON bool, stdout io.Writer) error {
	dir, err := resolveStateDir(c.stateDir)
	if err != nil {
		return err
	}
	store := oauthclient.OpenStore(dir)
	names, err := store.Servers()
	if err != nil {
		return err
	}
	rows := []authRow{}
	for _, n := range names {
		cr, err := store.Load(n)
		if err != nil {
			rows = append(rows, authRow{Server: n, Error: err.Error()})
			continue
		}
		rows = append(rows, authRow{Server: n, URL: cr.ServerURL, ClientID: cr.ClientID, Registered: cr.Registered, Scopes: cr.Scopes,
			Expiry: cr.Token.Expiry, Refresh: cr.Token.RefreshToken != "", LoggedIn: cr.LoggedIn})
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintf(stdout, "no logins stored in %s\n", store.Dir())
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tURL\tCLIENT\tSCOPES\tACCESS TOKEN\tREFRESH")
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t\t\t\t%s\t\n", r.Server, r.Error)
			continue
		}
		exp := "no expiry"
		if !r.Expiry.IsZero() {
			if d := time.Until(r.Expiry); d > 0 {
				exp = "expires in " + d.Round(time.Second).String()
			} else {
				exp = "expired " + (-d).Round(time.Second).String() + " ago"
			}
		}
		refresh := "no"
		if r.Refresh {
			refresh = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Server, r.URL, r.ClientID, strings.Join(r.Scopes, " "), exp, refresh)
	}
	return tw.Flush()
}
