// Package config loads toolgate's configuration: the Claude Desktop style
// mcpServers map plus the filters object, decoded strictly (an unknown key is
// an error naming the key and the file), with $VAR references resolved from a
// .env file beside the config and then the process environment.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/glob"
)

// DefaultSimilarityThreshold is the score below which search results are
// dropped when the config does not say otherwise.
const DefaultSimilarityThreshold = 0.3

// Config is a loaded, validated and resolved configuration.
type Config struct {
	// Path is the absolute path of the file the config was read from, or ""
	// for a config built in code.
	Path string
	// Dir is the folder relative paths in the config are resolved against.
	Dir string
	// Servers are the upstream MCP servers by name.
	Servers map[string]*Server
	// Filters holds similarity_threshold and the raw configuration of every
	// other filter key, which the extension that owns the key decodes.
	Filters Filters
	// DotEnv holds the variables of the .env file beside the config.
	DotEnv map[string]string
	// Search configures the tool index.
	Search Search
	// Audit configures the audit log.
	Audit Audit
	// Limits bounds what upstream tool lists may hold (limits.go).
	Limits Limits
	// Exposure says what the client sees: the meta-tools (mode "meta"),
	// the upstream tools themselves ("passthrough"), or both ("hybrid");
	// see mode.go.
	Exposure
	// MaxResponseBytes is the gateway-wide bound of one message from an
	// upstream server (0: DefaultMaxResponseBytes); a server's own
	// max_response_bytes overrides it.
	MaxResponseBytes int64
	// Ignored lists the top-level keys of other MCP clients' files
	// (Claude Desktop's globalShortcut, VS Code's inputs, ...) that were
	// read and ignored, sorted; the gateway logs them once.
	Ignored []string
	// ServersKey is the key the servers were read from: "mcpServers", or
	// "servers" for a VS Code mcp.json.
	ServersKey string
	// HTTP configures the streamable HTTP frontend; see http.go.
	HTTP HTTP
	// Auth authenticates the HTTP frontend's callers; nil when the file
	// has no "auth" (see auth.go).
	Auth *Auth
	// LLMProxy configures the LLM-API proxy; nil when the file has no
	// llm_proxy object.
	LLMProxy *LLMProxy
	// State says where decisions that span calls live: in the process
	// (default) or in Redis, shared by replicas (see state.go).
	State State
}

// Audit is the "audit" object.
type Audit struct {
	// Enabled turns the audit log on (default true).
	Enabled *bool `json:"enabled,omitempty"`
	// Path of the log (default: audit.jsonl in the state directory),
	// relative to the config.
	Path string `json:"path,omitempty"`
	// RecordArguments stores argument values; by default only their hash.
	RecordArguments bool `json:"record_arguments,omitempty"`
	// Fsync syncs every record to disk before the call returns. Without it
	// a record still reaches the kernel before the call returns, which
	// survives kill -9 but not a power cut.
	Fsync bool `json:"fsync,omitempty"`
	// MaxSizeMB rotates the log when it would grow past this many MiB
	// (default 64); MaxFiles is how many files are kept, the current one
	// included (default 8).
	MaxSizeMB int `json:"max_size_mb,omitempty"`
	MaxFiles  int `json:"max_files,omitempty"`
}

// On reports whether the audit log is enabled.
func (a Audit) On() bool { return a.Enabled == nil || *a.Enabled }

// Search modes.
const (
	// SearchAuto, the default, is SearchHybrid when the embedding model is
	// installed and SearchLexical (with a warning) when it is not.
	SearchAuto    = "auto"
	SearchHybrid  = "hybrid"
	SearchLexical = "lexical"
	SearchDense   = "dense"
)

// Search is the "search" object.
type Search struct {
	// Mode is "auto" (default), "hybrid", "lexical" or "dense".
	Mode string `json:"mode,omitempty"`
	// ModelDir holds the embedding model (default: model.Find's lookup:
	// $TOOLGATE_MODEL_DIR, the user cache folder, the checkout), relative
	// to the config.
	ModelDir string `json:"model_dir,omitempty"`
	// DenseWeight is the share of the semantic score in hybrid mode.
	DenseWeight *float64 `json:"dense_weight,omitempty"`
}

// Filters is the "filters" object.
type Filters struct {
	SimilarityThreshold float64
	// Extensions maps a filter key (e.g. "access_control") to its raw JSON.
	Extensions map[string]json.RawMessage
	// Order lists the keys of Extensions as they appear in the file: inside
	// a pipeline phase, built-in filters run in this order.
	Order []string
	// EgressDefault is filters.egress.default: the egress of every stdio
	// server that has none (nil: "off").
	EgressDefault *Egress
}

// Transport names accepted in a server's "transport" field.
const (
	TransportStdio          = "stdio"
	TransportStreamableHTTP = "streamable-http"
	TransportSSE            = "sse"
)

// serverTypes maps the "type" values other MCP clients write (Claude Code's
// .mcp.json, Cursor, VS Code) to toolgate's transports.
var serverTypes = map[string]string{
	"stdio":           TransportStdio,
	"http":            TransportStreamableHTTP,
	"streamable-http": TransportStreamableHTTP,
	"sse":             TransportSSE,
}

// Server is one entry of mcpServers.
type Server struct {
	Name    string            `json:"-"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Transport is "stdio" for command servers; for url servers it is
	// "streamable-http" (the default, falling back to SSE) or "sse".
	Transport string `json:"transport,omitempty"`
	// Type is the other clients' spelling of the transport: "stdio",
	// "http" (streamable HTTP), "streamable-http" or "sse". After Parse,
	// Transport holds the transport either key asked for.
	Type string `json:"type,omitempty"`
	// Disabled servers are kept in the config but never started.
	Disabled bool `json:"disabled,omitempty"`
	// DisabledReason says why Parse disabled a server the file did not
	// disable (a $VAR that is not set); "" for servers disabled in the file.
	// It names variables, never values.
	DisabledReason string `json:"-"`
	// Vars are the variables substituted into URL, Command and Args, by
	// name, so that the redactor can mask those that hold a secret (a key
	// in a path or an argument). Those of Env and Headers are their values.
	Vars map[string]string `json:"-"`
	// unresolved is set when a variable did not resolve: the values are
	// left as written and the server is disabled.
	unresolved bool
	// EnvAllow and EnvDeny (globs) choose what of the gateway's own
	// environment a stdio server inherits; see secrets.EnvFilter.
	EnvAllow []string `json:"env_allow,omitempty"`
	EnvDeny  []string `json:"env_deny,omitempty"`
	// Dir is the working directory of a stdio server, relative to the
	// config's folder (default: the config's folder).
	Dir string `json:"cwd,omitempty"`
	// EnvFile is a file of KEY=VALUE lines (VS Code's and Cursor's
	// "envFile"), relative to the config's folder, whose variables a stdio
	// server gets beside Env; Env wins on the same name. Parse reads it.
	EnvFile string `json:"envFile,omitempty"`
	// Lazy servers are not started until one of their tools is called;
	// their tools are searchable from the catalogue cache meanwhile.
	Lazy bool `json:"lazy,omitempty"`
	// IdleTimeout is how many seconds a server may go without a call
	// before it is stopped (nil: DefaultIdleTimeout; 0: never).
	IdleTimeout *float64 `json:"idle_timeout,omitempty"`
	// CallTimeout bounds one tool call, in seconds (nil: DefaultCallTimeout).
	CallTimeout *float64 `json:"call_timeout,omitempty"`
	// MaxResponseBytes bounds one message from the server: an HTTP response
	// body, an SSE event or a stdio line (nil: the gateway-wide
	// max_response_bytes, else DefaultMaxResponseBytes).
	MaxResponseBytes *int64 `json:"max_response_bytes,omitempty"`
	// Egress is what a stdio server may connect to (nil: "off"). After
	// Parse it holds filters.egress.default for a server with none.
	Egress *Egress `json:"egress,omitempty"`
	// OAuth configures how "toolgate auth login" logs in to a remote
	// server that needs OAuth (nil: discovered from the server's 401, with
	// dynamic client registration).
	OAuth *OAuthClient `json:"oauth,omitempty"`
}

// OAuthClient is a remote server's OAuth client registration, for
// servers whose authorization server needs a pre-registered client or
// particular scopes.
type OAuthClient struct {
	// ClientID of a pre-registered client ("": dynamic registration).
	ClientID string `json:"client_id,omitempty"`
	// ClientSecret of a confidential pre-registered client; "$VAR" reads
	// it from the environment or the config's .env.
	ClientSecret string `json:"client_secret,omitempty"`
	// Scopes to ask for (default: those the server's metadata names).
	Scopes []string `json:"scopes,omitempty"`
	// RedirectPort is the loopback port the login listens on (0: any free
	// port; set it when the client is registered with a fixed redirect
	// URI http://127.0.0.1:PORT/callback).
	RedirectPort int `json:"redirect_port,omitempty"`
}

// DefaultMaxResponseBytes bounds one message from an upstream server unless
// the config says otherwise; it is the MCP Go SDK's own default for stdio
// lines and SSE events.
const DefaultMaxResponseBytes = 16 << 20

// maxResponseBytes bounds max_response_bytes (1 GiB), so a typo cannot ask
// the gateway to buffer without bound.
const maxResponseBytes = 1 << 30

func validResponseLimit(v int64) error {
	if v < 1024 || v > maxResponseBytes {
		return fmt.Errorf("max_response_bytes %d: want a number of bytes between 1024 and %d", v, maxResponseBytes)
	}
	return nil
}

// Lifecycle defaults of a server.
const (
	DefaultIdleTimeout = 300 * time.Second
	DefaultCallTimeout = 60 * time.Second
)

// Idle returns the server's idle timeout; 0 means it is never stopped for
// being idle.
func (s *Server) Idle() time.Duration {
	if s.IdleTimeout == nil {
		return DefaultIdleTimeout
	}
	return seconds(*s.IdleTimeout)
}

// CallLimit returns the server's call timeout, or 0 when the config does
// not set one (the caller's default applies).
func (s *Server) CallLimit() time.Duration {
	if s.CallTimeout == nil {
		return 0
	}
	return seconds(*s.CallTimeout)
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// maxSeconds bounds idle_timeout and call_timeout (a year), so a typo does
// not overflow a time.Duration.
const maxSeconds = 365 * 24 * 3600

// IsRemote reports whether the server is reached over HTTP.
func (s *Server) IsRemote() bool { return s.URL != "" }

type fileFormat struct {
	MCPServers map[string]json.RawMessage `json:"mcpServers"`
	// VSCodeServers is VS Code's name for mcpServers (.vscode/mcp.json).
	VSCodeServers map[string]json.RawMessage `json:"servers,omitempty"`
	otherClients
	Filters json.RawMessage `json:"filters,omitempty"`
	// Search and Audit are decoded on their own, so an unknown key in
	// them is matched against their keys for a did-you-mean.
	Search json.RawMessage `json:"search,omitempty"`
	Audit  json.RawMessage `json:"audit,omitempty"`
	HTTP   json.RawMessage `json:"http,omitempty"`
	Auth   json.RawMessage `json:"auth,omitempty"`
	Limits *Limits         `json:"limits,omitempty"`
	// LLMProxy is decoded on its own, like Search and Audit.
	LLMProxy json.RawMessage `json:"llm_proxy,omitempty"`
	State    json.RawMessage `json:"state,omitempty"`
	Exposure
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
	// Schema lets editors attach a JSON schema; it is otherwise ignored.
	Schema string `json:"$schema,omitempty"`
	// Review is informational (e.g. the blocked tools a generated policy
	// lists for a person to look at); toolgate ignores it.
	Review json.RawMessage `json:"review,omitempty"`
}

// otherClients are the top-level keys other MCP clients keep beside their
// servers, so that their whole file loads: they are read, ignored and
// reported in Config.Ignored. Any other unknown key is still an error.
type otherClients struct {
	// Claude Desktop (claude_desktop_config.json).
	GlobalShortcut           json.RawMessage `json:"globalShortcut,omitempty"`
	Preferences              json.RawMessage `json:"preferences,omitempty"`
	IsUsingBuiltInNodeForMcp json.RawMessage `json:"isUsingBuiltInNodeForMcp,omitempty"`
	IsDxtEnabled             json.RawMessage `json:"isDxtEnabled,omitempty"`
	IsDxtAutoUpdatesEnabled  json.RawMessage `json:"isDxtAutoUpdatesEnabled,omitempty"`
	Theme                    json.RawMessage `json:"theme,omitempty"`
	Telemetry                json.RawMessage `json:"telemetry,omitempty"`
	// VS Code (mcp.json): the prompts behind ${input:ID}; toolgate cannot
	// prompt, so a server that refers to one is disabled (see Expand).
	Inputs json.RawMessage `json:"inputs,omitempty"`
}

// present lists the keys of o that the file set, sorted.
func (o *otherClients) present() []string {
	var keys []string
	v := reflect.ValueOf(o).Elem()
	for i := range v.NumField() {
		if len(v.Field(i).Bytes()) > 0 {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			keys = append(keys, name)
		}
	}
	sort.Strings(keys)
	return keys
}

// Error is a configuration problem with the file it came from.
type Error struct {
	File string
	Msg  string
}

func (e *Error) Error() string {
	if e.File == "" {
		return "config: " + e.Msg
	}
	return fmt.Sprintf("config %s: %s", e.File, e.Msg)
}

// Find returns the config path to use: flag, then $TOOLGATE_CONFIG, then
// ~/.config/toolgate/config.json, then ./config.json. It errors when none
// exists, listing where it looked.
func Find(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if env := os.Getenv("TOOLGATE_CONFIG"); env != "" {
		return env, nil
	}
	var tried []string
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".config", "toolgate", "config.json")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	if _, err := os.Stat("config.json"); err == nil {
		return "config.json", nil
	}
	tried = append(tried, "./config.json")
	return "", fmt.Errorf("config: no config file given (--config or TOOLGATE_CONFIG) and none found at %s", strings.Join(tried, ", "))
}

// Load reads, decodes and validates the config at path, resolving $VAR
// references from the .env beside it and then the environment.
func Load(path string) (*Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return nil, &Error{File: path, Msg: fmt.Sprintf("read: %v", errors.Unwrap(err))}
	}
	dir := filepath.Dir(abs)
	dotenv, err := ReadDotEnv(filepath.Join(dir, ".env"))
	if err != nil {
		return nil, err
	}
	cfg, err := Parse(data, abs, dotenv)
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// Parse decodes config bytes. file names the source in errors; relative
// paths resolve against its folder. dotenv may be nil.
func Parse(data []byte, file string, dotenv map[string]string) (*Config, error) {
	var ff fileFormat
	if err := strictDecode(data, &ff); err != nil {
		return nil, &Error{File: file, Msg: err.Error()}
	}
	serversKey := "mcpServers"
	switch {
	case ff.MCPServers != nil && ff.VSCodeServers != nil:
		return nil, &Error{File: file, Msg: `both "mcpServers" and "servers" (VS Code's name for it) are set; keep one`}
	case ff.VSCodeServers != nil:
		ff.MCPServers, serversKey = ff.VSCodeServers, "servers"
	case ff.MCPServers == nil:
		return nil, &Error{File: file, Msg: `missing "mcpServers" object`}
	}
	cfg := &Config{
		Path:       file,
		Servers:    make(map[string]*Server, len(ff.MCPServers)),
		DotEnv:     dotenv,
		Ignored:    ff.otherClients.present(),
		ServersKey: serversKey,
	}
	if file != "" {
		cfg.Dir = filepath.Dir(file)
	}
	lookup := cfg.Lookup
	names := make([]string, 0, len(ff.MCPServers))
	for name := range ff.MCPServers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var s Server
		where := serversKey + "." + name
		if err := strictDecode(ff.MCPServers[name], &s); err != nil {
			return nil, &Error{File: file, Msg: fmt.Sprintf("%s: %v", where, err)}
		}
		s.Name = name
		// A variable that is not set disables this server only, so one
		// missing token does not stop every other server; the gateway
		// warns with the reason and `toolgate config check` fails on it.
		// A server the file disables needs none of its variables.
		err := s.resolve(lookup)
		if err == nil && s.EnvFile != "" && !s.Disabled {
			err = s.readEnvFile(cfg.Dir)
		}
		if err != nil {
			s.unresolved = true
			if !s.Disabled {
				s.Disabled, s.DisabledReason = true, err.Error()
			}
		}
		if err := s.validate(); err != nil {
			return nil, &Error{File: file, Msg: fmt.Sprintf("%s: %v", where, err)}
		}
		// A stdio server runs in the config's folder unless told otherwise,
		// so relative paths in command and args mean the same as elsewhere
		// in the config.
		if s.Command != "" && !filepath.IsAbs(s.Dir) {
			s.Dir = filepath.Join(cfg.Dir, s.Dir)
		}
		cfg.Servers[name] = &s
	}
	if len(ff.Search) > 0 {
		if err := strictDecode(ff.Search, &cfg.Search); err != nil {
			return nil, &Error{File: file, Msg: fmt.Sprintf("search: %v", err)}
		}
	}
	if len(ff.Audit) > 0 {
		if err := strictDecode(ff.Audit, &cfg.Audit); err != nil {
			return nil, &Error{File: file, Msg: fmt.Sprintf("audit: %v", err)}
		}
		if cfg.Audit.Path != "" && !filepath.IsAbs(cfg.Audit.Path) {
			cfg.Audit.Path = filepath.Join(cfg.Dir, cfg.Audit.Path)
		}
		if cfg.Audit.MaxSizeMB < 0 || cfg.Audit.MaxFiles < 0 {
			return nil, &Error{File: file, Msg: fmt.Sprintf("audit: max_size_mb (%d) and max_files (%d) must be positive (0: the default)", cfg.Audit.MaxSizeMB, cfg.Audit.MaxFiles)}
		}
	}
	if len(ff.LLMProxy) > 0 && string(bytes.TrimSpace(ff.LLMProxy)) != "null" {
		lp, err := parseLLMProxy(ff.LLMProxy)
		if err != nil {
			return nil, &Error{File: file, Msg: err.Error()}
		}
		cfg.LLMProxy = lp
	}
	if len(ff.State) > 0 {
		if err := strictDecode(ff.State, &cfg.State); err != nil {
			return nil, &Error{File: file, Msg: fmt.Sprintf("state: %v", err)}
		}
	}
	if err := cfg.State.parse(cfg.Dir, cfg.Lookup); err != nil {
		return nil, &Error{File: file, Msg: err.Error()}
	}
	if len(ff.HTTP) > 0 {
		if err := strictDecode(ff.HTTP, &cfg.HTTP); err != nil {
			return nil, &Error{File: file, Msg: fmt.Sprintf("http: %v", err)}
		}
		if err := cfg.HTTP.validate(); err != nil {
			return nil, &Error{File: file, Msg: err.Error()}
		}
	}
	if len(ff.Auth) > 0 {
		cfg.Auth = &Auth{}
		if err := strictDecode(ff.Auth, cfg.Auth); err != nil {
			return nil, &Error{File: file, Msg: fmt.Sprintf("auth: %v", err)}
		}
		if err := cfg.Auth.validate(cfg.Dir, cfg.Lookup); err != nil {
			return nil, &Error{File: file, Msg: err.Error()}
		}
	}
	if ff.Limits != nil {
		if err := ff.Limits.validate(); err != nil {
			return nil, &Error{File: file, Msg: err.Error()}
		}
		cfg.Limits = *ff.Limits
	}
	if err := cfg.Search.validate(cfg.Dir); err != nil {
		return nil, &Error{File: file, Msg: err.Error()}
	}
	f, err := parseFilters(ff.Filters)
	if err != nil {
		return nil, &Error{File: file, Msg: err.Error()}
	}
	cfg.Filters = f
	for _, name := range names {
		if err := cfg.Servers[name].applyEgress(f.EgressDefault); err != nil {
			return nil, &Error{File: file, Msg: fmt.Sprintf("%s.%s: %v", serversKey, name, err)}
		}
	}
	cfg.Exposure = ff.Exposure
	if err := cfg.validateExposure(); err != nil {
		return nil, &Error{File: file, Msg: err.Error()}
	}
	if v := ff.MaxResponseBytes; v != 0 {
		if err := validResponseLimit(v); err != nil {
			return nil, &Error{File: file, Msg: err.Error()}
		}
		cfg.MaxResponseBytes = v
	}
	return cfg, nil
}

func parseFilters(raw json.RawMessage) (Filters, error) {
	f := Filters{SimilarityThreshold: DefaultSimilarityThreshold, Extensions: map[string]json.RawMessage{}}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return f, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return f, fmt.Errorf("filters: %v", err)
	}
	order, err := objectKeys(raw)
	if err != nil {
		return f, fmt.Errorf("filters: %v", err)
	}
	for _, k := range order {
		v := m[k]
		if k == "similarity_threshold" {
			var t float64
			if err := json.Unmarshal(v, &t); err != nil {
				return f, fmt.Errorf("filters.similarity_threshold: want a number: %v", err)
			}
			if t < 0 || t > 1 {
				return f, fmt.Errorf("filters.similarity_threshold: %v is outside [0, 1]", t)
			}
			f.SimilarityThreshold = t
			continue
		}
		if k == "egress" {
			// Not a call filter: it configures the server processes.
			if f.EgressDefault, err = parseEgressFilter(v); err != nil {
				return f, err
			}
			continue
		}
		if _, dup := f.Extensions[k]; dup {
			return f, fmt.Errorf("filters: key %q appears twice", k)
		}
		f.Extensions[k] = v
		f.Order = append(f.Order, k)
	}
	return f, nil
}

// objectKeys returns the keys of a JSON object in file order.
func objectKeys(raw json.RawMessage) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		keys = append(keys, k)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// ValidateServerName reports whether name can be used for an upstream:
// non-empty, without "__" (the namespace separator), of letters, digits,
// '-', '_' and '.'.
func ValidateServerName(name string) error {
	if name == "" {
		return errors.New("server name is empty")
	}
	if strings.Contains(name, "__") {
		return fmt.Errorf("server name %q contains %q, which separates server and tool names", name, "__")
	}
	if strings.HasPrefix(name, "_") || strings.HasSuffix(name, "_") {
		// "bank_" + "__" + "x" would read back as server "bank", tool "_x".
		return fmt.Errorf("server name %q starts or ends with '_', which would make qualified names ambiguous", name)
	}
	if len(name) > 64 {
		return fmt.Errorf("server name %q is longer than 64 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("server name %q: character %q is not allowed (use letters, digits, '-', '_', '.')", name, r)
		}
	}
	return nil
}

func (s *Server) validate() error {
	if err := ValidateServerName(s.Name); err != nil {
		return err
	}
	if v := s.IdleTimeout; v != nil && (*v < 0 || *v > maxSeconds) {
		return fmt.Errorf("idle_timeout %v: want seconds between 0 (never stop) and %d", *v, maxSeconds)
	}
	if v := s.CallTimeout; v != nil && (*v <= 0 || *v > maxSeconds) {
		return fmt.Errorf("call_timeout %v: want seconds above 0 and at most %d", *v, maxSeconds)
	}
	if v := s.MaxResponseBytes; v != nil {
		if err := validResponseLimit(*v); err != nil {
			return err
		}
	}
	switch {
	case s.Command != "" && s.URL != "":
		return errors.New(`set either "command" (stdio) or "url" (remote), not both`)
	case s.Command == "" && s.URL == "":
		return errors.New(`missing "command" (stdio server) or "url" (remote server)`)
	}
	if err := s.applyType(); err != nil {
		return err
	}
	switch {
	case s.Command != "":
		if s.Transport != "" && s.Transport != TransportStdio {
			return fmt.Errorf(`transport %q does not go with "command"; only "stdio"`, s.Transport)
		}
		if len(s.Headers) > 0 {
			return errors.New(`"headers" only apply to url servers`)
		}
		if s.OAuth != nil {
			return errors.New(`"oauth" only applies to url servers`)
		}
		for _, g := range append(append([]string{}, s.EnvAllow...), s.EnvDeny...) {
			if err := glob.Validate(g); err != nil {
				return fmt.Errorf("env_allow/env_deny: bad glob pattern %q: %v", g, err)
			}
		}
		s.Transport = TransportStdio
	default:
		// A url holding an unset variable cannot be checked; its server is
		// disabled, with that reason unless the file disabled it already.
		if err := ValidateURL(s.URL); err != nil && !s.unresolved {
			return err
		}
		if o := s.OAuth; o != nil && (o.RedirectPort < 0 || o.RedirectPort > 65535) {
			return fmt.Errorf("oauth.redirect_port %d: want a port number (0: any free port)", o.RedirectPort)
		}
		switch s.Transport {
		case "":
			s.Transport = TransportStreamableHTTP
		case TransportStreamableHTTP, TransportSSE:
		default:
			return fmt.Errorf(`unknown transport %q (want "streamable-http" or "sse")`, s.Transport)
		}
		if len(s.Args) > 0 || len(s.Env) > 0 || len(s.EnvAllow) > 0 || len(s.EnvDeny) > 0 || s.EnvFile != "" {
			return errors.New(`"args", "env", "envFile", "env_allow" and "env_deny" only apply to command servers`)
		}
	}
	return nil
}

// applyType checks "type" against "command"/"url" and "transport" and
// turns it into Transport.
func (s *Server) applyType() error {
	if s.Type == "" {
		return nil
	}
	want, ok := serverTypes[s.Type]
	if !ok {
		return fmt.Errorf(`unknown type %q (want "stdio", "http", "streamable-http" or "sse")`, s.Type)
	}
	switch {
	case want == TransportStdio && s.Command == "":
		return fmt.Errorf(`"type": %q needs "command"; this server has "url" (use "http" or "sse")`, s.Type)
	case want != TransportStdio && s.Command != "":
		return fmt.Errorf(`"type": %q needs "url"; this server has "command" (use "stdio")`, s.Type)
	case s.Transport != "" && s.Transport != want:
		return fmt.Errorf(`"type": %q and "transport": %q disagree; keep one`, s.Type, s.Transport)
	}
	s.Transport = want
	return nil
}

// ValidateURL checks that raw is an absolute http(s) URL.
func ValidateURL(raw string) error {
	u, err := parseHTTPURL(raw)
	if err != nil {
		return err
	}
	_ = u
	return nil
}

// resolve expands the variables of url, command, args, env and headers,
// in that order and in key order, so the error names the same first problem
// every time. On error s is left unexpanded: a server whose variables do
// not all resolve must not start with some of them.
func (s *Server) resolve(lookup func(string) (string, bool)) error {
	vars := map[string]string{}
	used := func(name, value string) { vars[name] = value }
	url, err := expand(s.URL, lookup, used, false)
	if err != nil {
		return fmt.Errorf("url: %v", err)
	}
	command, err := expand(s.Command, lookup, used, true)
	if err != nil {
		return fmt.Errorf("command: %v", err)
	}
	var args []string
	if s.Args != nil {
		args = make([]string, 0, len(s.Args))
	}
	for i, a := range s.Args {
		r, err := expand(a, lookup, used, true)
		if err != nil {
			return fmt.Errorf("args[%d]: %v", i, err)
		}
		args = append(args, r)
	}
	envFile, err := expand(s.EnvFile, lookup, used, true)
	if err != nil {
		return fmt.Errorf("envFile: %v", err)
	}
	env, err := expandMap("env", s.Env, lookup)
	if err != nil {
		return err
	}
	headers, err := expandMap("headers", s.Headers, lookup)
	if err != nil {
		return err
	}
	if o := s.OAuth; o != nil && o.ClientSecret != "" {
		secret, err := expand(o.ClientSecret, lookup, used, false)
		if err != nil {
			return fmt.Errorf("oauth.client_secret: %v", err)
		}
		c := *o
		c.ClientSecret = secret
		s.OAuth = &c
	}
	s.URL, s.Command, s.Args, s.EnvFile, s.Env, s.Headers = url, command, args, envFile, env, headers
	if len(vars) > 0 {
		s.Vars = vars
	}
	return nil
}

// readEnvFile adds the variables of EnvFile that Env does not set. A file
// that is missing or does not parse disables the server like an unset
// variable: the server would start without what it needs.
func (s *Server) readEnvFile(dir string) error {
	p := s.EnvFile
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	data, err := readSmallFile(p, maxEnvFile)
	if err != nil {
		return fmt.Errorf("envFile %s: %v", p, err)
	}
	vars, err := ParseKeyValues(data)
	if err != nil {
		return fmt.Errorf("envFile %s: %v", p, err)
	}
	if s.Env == nil && len(vars) > 0 {
		s.Env = make(map[string]string, len(vars))
	}
	for k, v := range vars {
		if _, set := s.Env[k]; !set {
			s.Env[k] = v
		}
	}
	return nil
}

// maxEnvFile bounds an envFile: a path such as /dev/zero must not grow
// memory without end.
const maxEnvFile = 1 << 20

// readSmallFile reads the regular file at p, refusing one above max bytes.
func readSmallFile(p string, max int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, errors.Unwrap(err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return data, nil
}

func expandMap(what string, m map[string]string, lookup func(string) (string, bool)) (map[string]string, error) {
	if m == nil {
		return nil, nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]string, len(m))
	for _, k := range keys {
		r, err := Expand(m[k], lookup)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %v", what, k, err)
		}
		out[k] = r
	}
	return out, nil
}

// Lookup resolves a variable from the config's .env first, then the process
// environment.
func (c *Config) Lookup(name string) (string, bool) {
	if v, ok := c.DotEnv[name]; ok {
		return v, true
	}
	return os.LookupEnv(name)
}

// varRef matches $NAME and ${NAME}, Claude Code's ${NAME:-default}, and VS
// Code's ${env:NAME} and ${input:ID}.
var varRef = regexp.MustCompile(`\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}|\{env:([A-Za-z_][A-Za-z0-9_]*)\}|\{input:([^}]*)\})`)

// UnsetError is a variable reference that neither the .env beside the
// config nor the environment defines.
type UnsetError struct{ Name string }

func (e *UnsetError) Error() string {
	return fmt.Sprintf("variable $%s is not set in .env beside the config nor in the environment", e.Name)
}

// InputError is a VS Code ${input:ID} reference: VS Code prompts the user
// for it, which a gateway cannot do.
type InputError struct{ ID string }

func (e *InputError) Error() string {
	return fmt.Sprintf("${input:%s} is a VS Code prompt, which toolgate cannot show; put the value in .env beside the config and refer to it as $NAME", e.ID)
}

// Expand replaces variable references in s using lookup: $VAR, ${VAR},
// ${VAR:-default} (default when VAR is unset or empty, as in a shell and
// Claude Code) and ${env:VAR} (VS Code). "$$" is a literal dollar. An
// unresolved variable is an *UnsetError naming it, a VS Code ${input:ID}
// an *InputError: passing the literal text on would hand a server
// "$GITHUB_TOKEN" as its token.
func Expand(s string, lookup func(string) (string, bool)) (string, error) {
	return expand(s, lookup, nil, false)
}

// expand is Expand that also hands each variable it substitutes to used.
// braced expands only the ${...} forms, and "$${" is a literal "${": in
// command and args a bare $NAME or $$ is left for a shell the server may
// run (`sh -c 'echo $HOME $$'`), while the braced forms Claude Code, Cursor
// and VS Code write are expanded as those clients do.
func expand(s string, lookup func(string) (string, bool), used func(name, value string), braced bool) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var first error
	escape, literal := "$$", "$"
	if braced {
		escape, literal = "$${", "${"
	}
	parts := strings.Split(s, escape)
	for i, p := range parts {
		var b strings.Builder
		last := 0
		for _, m := range varRef.FindAllStringSubmatchIndex(p, -1) {
			b.WriteString(p[last:m[0]])
			last = m[1]
			group := func(n int) (string, bool) {
				if m[2*n] < 0 {
					return "", false
				}
				return p[m[2*n]:m[2*n+1]], true
			}
			if id, ok := group(5); ok {
				if first == nil {
					first = &InputError{ID: id}
				}
				continue
			}
			name, ok := group(1)
			if ok && braced {
				b.WriteString(p[m[0]:m[1]])
				continue
			}
			if !ok {
				if name, ok = group(2); !ok {
					name, _ = group(4)
				}
			}
			v, set := lookup(name)
			if def, ok := group(3); ok && v == "" {
				v, set = def[2:], true
			}
			if !set && first == nil {
				first = &UnsetError{Name: name}
			}
			if set && used != nil {
				used(name, v)
			}
			b.WriteString(v)
		}
		b.WriteString(p[last:])
		parts[i] = b.String()
	}
	if first != nil {
		return "", first
	}
	return strings.Join(parts, literal), nil
}

func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(data, err, jsonKeys(v))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the top-level JSON value")
	}
	return nil
}

func describeJSONError(data []byte, err error, known []string) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		line, col := position(data, syn.Offset)
		return fmt.Errorf("line %d column %d: %v", line, col, syn)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		if typ.Field == "" && typ.Type.Kind() == reflect.Struct {
			// The whole value: the file, or one server entry.
			return fmt.Errorf("want a JSON object, got JSON %s", typ.Value)
		}
		field := typ.Field
		if field == "" {
			field = "value"
		}
		return fmt.Errorf("%s: want %s, got JSON %s", field, typ.Type, typ.Value)
	}
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		quoted := strings.TrimPrefix(msg, "json: unknown field ")
		key, uerr := strconv.Unquote(quoted)
		if uerr != nil {
			key = quoted
		}
		return fmt.Errorf("unknown key %s%s", quoted, didYouMean(key, known))
	}
	if errors.Is(err, io.EOF) {
		return errors.New("empty file")
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("unexpected end of JSON")
	}
	return err
}

func position(data []byte, off int64) (line, col int) {
	line = 1
	col = 1
	for i := int64(0); i < off && i < int64(len(data)); i++ {
		if data[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

func (s *Search) validate(dir string) error {
	switch s.Mode {
	case "":
		s.Mode = SearchAuto
	case SearchAuto, SearchHybrid, SearchLexical, SearchDense:
	default:
		return fmt.Errorf("search.mode %q: want %q, %q, %q or %q", s.Mode, SearchAuto, SearchHybrid, SearchLexical, SearchDense)
	}
	if w := s.DenseWeight; w != nil && (*w < 0 || *w > 1) {
		return fmt.Errorf("search.dense_weight %v is outside [0, 1]", *w)
	}
	if s.ModelDir != "" && !filepath.IsAbs(s.ModelDir) && dir != "" {
		s.ModelDir = filepath.Join(dir, s.ModelDir)
	}
	return nil
}
