// Package oauthclient is toolgate's OAuth client for remote MCP servers
// that need OAuth: "toolgate auth login SERVER" runs the authorization
// code flow with PKCE through the MCP Go SDK (discovery from the server's
// 401 and protected resource metadata, dynamic client registration where
// the authorization server supports it), the resulting tokens are kept
// encrypted in the state folder, and the gateway reads a server's access
// token from there, refreshing it before it expires.
//
// The store: <state>/oauth/key is 32 random bytes (mode 0600), and each
// server's credential is <state>/oauth/<server>.json.enc, AES-256-GCM with
// the server's name as additional data, so a file copied to another
// server's name does not decrypt.
package oauthclient

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// Credential is what a login leaves for a server: the client it used, the
// authorization server's endpoints and the tokens.
type Credential struct {
	// ServerURL is the URL the login was for; the token is sent only to
	// a server configured at that URL.
	ServerURL string `json:"server_url"`
	// Resource is the resource indicator the token was requested for.
	Resource     string   `json:"resource,omitempty"`
	ClientID     string   `json:"client_id"`
	ClientSecret string   `json:"client_secret,omitempty"`
	AuthURL      string   `json:"auth_url"`
	TokenURL     string   `json:"token_url"`
	AuthStyle    int      `json:"auth_style,omitempty"`
	Scopes       []string `json:"scopes,omitempty"`
	// Registered is true when the client was registered dynamically.
	Registered bool          `json:"registered,omitempty"`
	Token      *oauth2.Token `json:"token"`
	LoggedIn   time.Time     `json:"logged_in"`
}

func (c *Credential) oauth2Config() *oauth2.Config {
	return &oauth2.Config{
		ClientID: c.ClientID, ClientSecret: c.ClientSecret, Scopes: c.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: c.AuthURL, TokenURL: c.TokenURL, AuthStyle: oauth2.AuthStyle(c.AuthStyle)},
	}
}

// Store keeps credentials encrypted in a folder.
type Store struct {
	dir string
}

// OpenStore returns the store in stateDir/oauth. It touches nothing until
// a credential is saved or read.
func OpenStore(stateDir string) *Store {
	return &Store{dir: filepath.Join(stateDir, "oauth")}
}

// Dir is the store's folder (safe to log).
func (s *Store) Dir() string { return s.dir }

const (
	keyFile = "key"
	suffix  = ".json.enc"
)

func (s *Store) path(server string) string { return filepath.Join(s.dir, server+suffix) }

// key reads the store's key, creating it (and the folder) when create is
// set. A key file others may read is refused: the tokens it guards are
// only as private as it is.
func (s *Store) key(create bool) ([]byte, error) {
	p := filepath.Join(s.dir, keyFile)
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return nil, fmt.Errorf("oauth store %s: %v", s.dir, errors.Unwrap(err))
		}
		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		f, oerr := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if oerr == nil {
			_, werr := f.Write(k)
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				return nil, fmt.Errorf("oauth store key %s: %v", p, werr)
			}
			return k, nil
		}
		if !errors.Is(oerr, fs.ErrExist) {
			return nil, fmt.Errorf("oauth store key %s: %v", p, errors.Unwrap(oerr))
		}
		// Another process created it first: use theirs.
		st, err = os.Stat(p)
	}
	if err != nil {
		return nil, fmt.Errorf("oauth store key %s: %w", p, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("oauth store key %s is readable by others (mode %o); chmod 600 it", p, st.Mode().Perm())
	}
	k, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("oauth store key %s: %v", p, errors.Unwrap(err))
	}
	if len(k) != 32 {
		return nil, fmt.Errorf("oauth store key %s: want 32 bytes, have %d", p, len(k))
	}
	return k, nil
}

func gcm(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// Save encrypts c and writes it for server, replacing any earlier one
// atomically.
func (s *Store) Save(server string, c *Credential) error {
	key, err := s.key(true)
	if err != nil {
		return err
	}
	plain, err := json.Marshal(c)
	if err != nil {
		return err
	}
	a, err := gcm(key)
	if err != nil {
		return err
	}
	nonce := make([]byte, a.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	sealed := a.Seal(nonce, nonce, plain, []byte(server))
	tmp, err := os.CreateTemp(s.dir, "."+server+".*")
	if err != nil {
		return fmt.Errorf("oauth store %s: %v", s.dir, errors.Unwrap(err))
	}
	_, err = tmp.Write(sealed)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.path(server))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("oauth store: saving %q: %v", server, err)
	}
	return nil
}

// ErrNoCredential is returned by Load for a server nobody logged in to.
var ErrNoCredential = errors.New("not logged in")

// Load decrypts server's credential.
func (s *Store) Load(server string) (*Credential, error) {
	sealed, err := os.ReadFile(s.path(server))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("server %q: %w", server, ErrNoCredential)
	}
	if err != nil {
		return nil, fmt.Errorf("oauth store: %v", err)
	}
	key, err := s.key(false)
	if err != nil {
		return nil, err
	}
	a, err := gcm(key)
	if err != nil {
		return nil, err
	}
	if len(sealed) < a.NonceSize() {
		return nil, fmt.Errorf("oauth store: %s is truncated; run toolgate auth login %s again", s.path(server), server)
	}
	plain, err := a.Open(nil, sealed[:a.NonceSize()], sealed[a.NonceSize():], []byte(server))
	if err != nil {
		return nil, fmt.Errorf("oauth store: %s does not decrypt with the store's key (corrupt, or another server's); run toolgate auth login %s again", s.path(server), server)
	}
	var c Credential
	if err := json.Unmarshal(plain, &c); err != nil || c.Token == nil {
		return nil, fmt.Errorf("oauth store: %s holds no credential; run toolgate auth login %s again", s.path(server), server)
	}
	return &c, nil
}

// stamp is the modification time of server's file, or zero.
func (s *Store) stamp(server string) time.Time {
	st, err := os.Stat(s.path(server))
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

// Delete forgets server's credential; deleting none is not an error.
func (s *Store) Delete(server string) error {
	err := os.Remove(s.path(server))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("oauth store: %v", err)
	}
	return nil
}

// Servers lists the servers with a stored credential, sorted.
func (s *Store) Servers() ([]string, error) {
	ents, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("oauth store: %v", err)
	}
	var out []string
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), suffix); ok && !strings.HasPrefix(name, ".") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}
