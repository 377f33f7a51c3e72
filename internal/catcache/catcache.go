// Package catcache keeps each upstream server's tool definitions in the
// state directory, so a lazy server's tools are searchable before it has
// ever been started in this run. An entry is keyed by a hash of the
// server's config (command, args, cwd, environment, URL, headers,
// transport): change any of them and the entry no longer applies. The
// values of env and headers enter the key only as their own SHA-256, and
// nothing of the config is stored in clear besides the server's name.
package catcache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/state"
)

// Dir is the cache's folder inside the state directory.
const Dir = "catalog"

// version is part of every key, so a change of the entry format or of the
// key's inputs invalidates old entries.
const version = "toolgate-catcache-v1"

// Key is the hex SHA-256 identifying a server's config.
func Key(cfg *config.Server) string {
	hashed := func(m map[string]string) map[string]string {
		if len(m) == 0 {
			return nil
		}
		out := make(map[string]string, len(m))
		for k, v := range m {
			h := sha256.Sum256([]byte(v))
			out[k] = hex.EncodeToString(h[:])
		}
		return out
	}
	doc := struct {
		Version   string            `json:"v"`
		Command   string            `json:"command,omitempty"`
		Args      []string          `json:"args,omitempty"`
		Dir       string            `json:"cwd,omitempty"`
		Env       map[string]string `json:"env,omitempty"`
		EnvAllow  []string          `json:"env_allow,omitempty"`
		EnvDeny   []string          `json:"env_deny,omitempty"`
		URL       string            `json:"url,omitempty"`
		Headers   map[string]string `json:"headers,omitempty"`
		Transport string            `json:"transport,omitempty"`
	}{version, cfg.Command, cfg.Args, cfg.Dir, hashed(cfg.Env), cfg.EnvAllow, cfg.EnvDeny, cfg.URL, hashed(cfg.Headers), cfg.Transport}
	b, _ := json.Marshal(doc) // map keys are sorted: the encoding is canonical
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Entry is one server's cached tool list.
type Entry struct {
	Server  string      `json:"server"`
	Key     string      `json:"key"`
	Updated time.Time   `json:"updated"`
	Tools   []*mcp.Tool `json:"tools"`
}

// Cache is the catalogue cache in a state directory, and in Redis too
// when replicas share state (see Share).
type Cache struct {
	dir    string
	shared *state.Backend
}

// sharedTTL is how long an entry stays in Redis after it was last saved.
const sharedTTL = 30 * 24 * time.Hour

// Share keeps entries in b's Redis as well, so a replica that has never
// run a server (a new one, or one on a fresh disk) starts with its tools
// searchable: an entry missing from the state directory is looked up in
// Redis and copied into the directory.
func (c *Cache) Share(b *state.Backend) { c.shared = b }

func (c *Cache) sharedKey(key string) string { return c.shared.Key("catcache", key) }

// New returns the cache under stateDir; nothing is touched until used.
func New(stateDir string) *Cache { return &Cache{dir: filepath.Join(stateDir, Dir)} }

func (c *Cache) path(key string) string { return filepath.Join(c.dir, key+".json") }

// Load returns the cached entry for cfg, or ok false when there is none.
// A damaged entry is reported as an error (and treated as absent by
// callers).
func (c *Cache) Load(cfg *config.Server) (e *Entry, ok bool, err error) {
	key := Key(cfg)
	b, err := os.ReadFile(c.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return c.loadShared(key)
	}
	if err != nil {
		return nil, false, fmt.Errorf("catalogue cache: %v", err)
	}
	e = &Entry{}
	if err := json.Unmarshal(b, e); err != nil || e.Key != key {
		return nil, false, fmt.Errorf("catalogue cache: %s is damaged; it will be rewritten when the server runs", c.path(key))
	}
	return e, true, nil
}

// loadShared is Load from Redis, for an entry the state directory lacks.
// Redis being away is a miss: the cache only saves a start.
func (c *Cache) loadShared(key string) (*Entry, bool, error) {
	if c.shared == nil {
		return nil, false, nil
	}
	b, err := c.shared.Client.Get(context.Background(), c.sharedKey(key)).Bytes()
	if err != nil {
		return nil, false, nil
	}
	e := &Entry{}
	if err := json.Unmarshal(b, e); err != nil || e.Key != key {
		return nil, false, fmt.Errorf("catalogue cache: Redis key %s is damaged; it will be rewritten when the server runs", c.sharedKey(key))
	}
	if err := c.write(key, e.Server, b); err != nil {
		return nil, false, err
	}
	return e, true, nil
}

// Save stores tools as cfg's entry (atomically, mode 0600) and removes
// entries of older configs of the same server.
func (c *Cache) Save(cfg *config.Server, tools []*mcp.Tool) error {
	key := Key(cfg)
	if tools == nil {
		tools = []*mcp.Tool{}
	}
	b, err := json.Marshal(&Entry{Server: cfg.Name, Key: key, Updated: time.Now().UTC(), Tools: tools})
	if err != nil {
		return fmt.Errorf("catalogue cache: %v", err)
	}
	if err := c.write(key, cfg.Name, b); err != nil {
		return err
	}
	if c.shared != nil {
		if err := c.shared.Client.Set(context.Background(), c.sharedKey(key), b, sharedTTL).Err(); err != nil {
			return fmt.Errorf("catalogue cache: %w", c.shared.Err(err))
		}
	}
	return nil
}

// write stores an encoded entry in the directory (atomically, mode 0600)
// and removes entries of older configs of server.
func (c *Cache) write(key, server string, b []byte) error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("catalogue cache: %v", err)
	}
	f, err := os.CreateTemp(c.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("catalogue cache: %v", err)
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("catalogue cache: %v", err)
	}
	if err := os.Rename(f.Name(), c.path(key)); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("catalogue cache: %v", err)
	}
	c.prune(server, key)
	return nil
}

// prune removes the entries of server other than key's.
func (c *Cache) prune(server, key string) {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	for _, de := range ents {
		name := de.Name()
		if !strings.HasSuffix(name, ".json") || name == key+".json" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(c.dir, name))
		if err != nil {
			continue
		}
		var e struct {
			Server string `json:"server"`
		}
		if json.Unmarshal(b, &e) == nil && e.Server == server {
			os.Remove(filepath.Join(c.dir, name))
		}
	}
}
