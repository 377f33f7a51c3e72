package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/relay"
	"github.com/toolgate/toolgate/internal/secrets"
)

// The test binary doubles as an upstream that writes its answers byte for
// byte (envRawUpstream): the SDK's servers always escape alike, and a
// hostile server need not.
const envRawUpstream = "TOOLGATE_GATEWAY_TEST_RAW_UPSTREAM"

// Secrets the raw upstream leaks, and how it spells them.
const (
	// tokenSecret is spelt with \u escapes, in a key, in _meta, in an
	// error.
	tokenSecret = "tok3n-ABCDEF123456"
	// slashSecret is spelt with an escaped '/'.
	slashSecret = "path/secret-XYZ99"
	// digitSecret is a number's digits.
	digitSecret = "98765432109"
)

// rawResults are the raw upstream's tools and what each answers: a result,
// or (a JSON-RPC error) an object with "code".
var rawResults = map[string]string{
	"plain":      `{"content":[{"type":"text","text":"nothing to hide \u003c\u0026\u003e"}],"structuredContent":{"a":[1,2.5],"b":"x"}}`,
	"unicode":    `{"content":[{"type":"text","text":"token \u0074ok3n-ABCDEF\u0031\u0032\u0033456 and path\/secret-XYZ99"}]}`,
	"quoted":     `{"content":[{"type":"text","text":"html-escaped sk-relay\"\u003c\u0026\u003e\\secret"},{"type":"text","text":"as is sk-relay\"<&>\\secret"}]}`,
	"escaped":    `{"content":[{"type":"text","text":"sk-relay\"\u003c\u0026\u003e\\secret, \u003csk-relay\"\u003c\u0026\u003e\\secret\u003e"}],"isError":true,"resultType":"complete"}`,
	"structured": `{"content":[{"type":"text","text":"see structuredContent"}],"structuredContent":{"list":["tok3n-ABCDEF123456",{"deep":"a tok3n-ABCDEF123456 b"}],"n":98765432109}}`,
	"keyed":      `{"content":[{"type":"text","text":"see the keys"}],"structuredContent":{"tok3n-ABCDEF123456":1,"ok":{"tok3n-ABCDEF123456":"v"}}}`,
	"meta":       `{"_meta":{"leak":"tok3n-ABCDEF123456","tok3n-ABCDEF123456":true},"content":[{"type":"text","text":"see _meta","_meta":{"k":"tok3n-ABCDEF123456"}}]}`,
	"iserror":    `{"content":[{"type":"text","text":"failed with tok3n-ABCDEF123456"}],"isError":true}`,
	"rpcerror":   `{"code":-32000,"message":"upstream broke: tok3n-ABCDEF123456","data":{"why":"\u0074ok3n-ABCDEF123456","tok3n-ABCDEF123456":1}}`,
	"extra":      `{"content":[{"type":"text","text":"x"}],"unknown":"tok3n-ABCDEF123456"}`,
}

// rawUpstream serves rawResults over stdin/stdout.
func rawUpstream() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name            string `json:"name"`
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil {
			continue
		}
		result, rpcErr := "", `{"code":-32601,"message":"method not found"}`
		switch m.Method {
		case "initialize":
			result = fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"raw-up","version":"1"}}`, m.Params.ProtocolVersion)
		case "ping":
			result = `{}`
		case "tools/list":
			var tools []string
			for _, n := range slices.Sorted(func(yield func(string) bool) {
				for n := range rawResults {
					if !yield(n) {
						return
					}
				}
			}) {
				tools = append(tools, fmt.Sprintf(`{"name":%q,"description":"Answers %s","inputSchema":{"type":"object"}}`, n, n))
			}
			result = `{"tools":[` + strings.Join(tools, ",") + `]}`
		case "tools/call":
			r, ok := rawResults[m.Params.Name]
			switch {
			case !ok:
				rpcErr = `{"code":-32602,"message":"unknown tool"}`
			case strings.HasPrefix(r, `{"code"`):
				rpcErr = r
			default:
				result = r
			}
		}
		if result != "" {
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", m.ID, result)
		} else {
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":%s}`+"\n", m.ID, rpcErr)
		}
		out.Flush()
	}
}

// sealRun is what a client saw through one gateway.
type sealRun struct {
	answers   []string
	undecoded uint64
}

// runSealLeg calls every tool of the raw upstream through a gateway that
// knows the secrets, from a stdio client (the relay's frontend), the
// upstream leg on the SDK client or the raw leg.
func runSealLeg(t *testing.T, mode string, sdk bool) sealRun {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	srv := &config.Server{Name: "up", Command: exe, Transport: config.TransportStdio,
		Env: map[string]string{envRawUpstream: "1", "GORACE": "atexit_sleep_ms=0"}}
	cfg := &config.Config{
		Exposure: config.Exposure{Mode: mode},
		Servers:  map[string]*config.Server{"up": srv},
		Filters:  config.Filters{SimilarityThreshold: config.DefaultSimilarityThreshold},
	}
	ctx := context.Background()
	red := secrets.NewRedactor(relaySecret, tokenSecret, slashSecret, digitSecret)
	g, err := New(ctx, Options{Config: cfg, StateDir: t.TempDir(), SDKCalls: sdk, Redactor: red})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	cr, gw := io.Pipe()
	gr, cw := io.Pipe()
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- g.serveIO(sctx, gr, gw) }()
	t.Cleanup(func() { stop(); cw.Close(); <-served })
	// The client's own reading of each answer is compared, and its bytes
	// are searched for the secrets. The SDK's reader may still be copying
	// into wire after the session is closed (the pipe stays open until the
	// cleanup), hence the lock.
	var wire lockedBuffer
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(io.TeeReader(cr, &wire)), Writer: cw}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if mode == config.ModeMeta {
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "answers", "top_k": 20}}); err != nil || res.IsError {
			t.Fatalf("search: %v %+v", err, res)
		}
	}
	var run sealRun
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range rawResults {
			if !yield(n) {
				return
			}
		}
	}) {
		p := &mcp.CallToolParams{Name: "up__" + name, Arguments: map[string]any{}}
		if mode == config.ModeMeta {
			p = &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "up__" + name, "arguments": map[string]any{}}}
		}
		res, err := cs.CallTool(ctx, p)
		if err != nil {
			run.answers = append(run.answers, name+": error: "+err.Error())
			continue
		}
		b, _ := json.Marshal(res)
		run.answers = append(run.answers, name+": "+string(b))
	}
	cs.Close()
	run.undecoded = g.undecoded.Load()
	// However the upstream spelt a secret, it reached the client in no
	// spelling: not raw, not JSON-escaped (with or without HTML escapes),
	// not with an escaped '/'.
	got := wire.String()
	for _, s := range []string{relaySecret, tokenSecret, slashSecret, digitSecret} {
		enc, _ := json.Marshal(s)
		for _, form := range []string{s, string(enc[1 : len(enc)-1]), jsonNoHTML(s), strings.ReplaceAll(s, "/", `\/`)} {
			if strings.Contains(got, form) {
				t.Errorf("%s leg: the client received %q:\n%s", map[bool]string{true: "sdk", false: "raw"}[sdk], form, got)
			}
		}
	}
	return run
}

func jsonNoHTML(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	out := strings.TrimSpace(b.String())
	return out[1 : len(out)-1]
}

// A hostile upstream spells the secrets every way JSON allows, puts them
// in keys, _meta, structuredContent, numbers and errors: the relay's
// answers (the raw leg, results forwarded undecoded when they can be) are
// the SDK leg's, and neither lets a secret through.
func TestSealedRawLegMatchesSDKLeg(t *testing.T) {
	for _, mode := range []string{config.ModeMeta, config.ModePassthrough} {
		t.Run(mode, func(t *testing.T) {
			sdk, raw := runSealLeg(t, mode, true), runSealLeg(t, mode, false)
			if !slices.Equal(sdk.answers, raw.answers) {
				t.Errorf("answers differ:\nsdk: %s\nraw: %s", strings.Join(sdk.answers, "\n     "), strings.Join(raw.answers, "\n     "))
			}
			all := strings.Join(raw.answers, "\n")
			for _, want := range []string{secrets.Mask, `nothing to hide \u003c\u0026\u003e`, `"n":0`} {
				if !strings.Contains(all, want) {
					t.Errorf("answers miss %q:\n%s", want, all)
				}
			}
			// The results in the plain shape whose secrets are in values
			// (escaped, iserror, plain, structured) were masked on their
			// bytes, undecoded; the others (a secret in a key, _meta,
			// escapes Marshal does not write, an unknown member) were
			// decoded, as the SDK leg decodes every result.
			if raw.undecoded != 4 || sdk.undecoded != 0 {
				t.Errorf("results answered undecoded: raw leg %d, SDK leg %d; want 4, 0", raw.undecoded, sdk.undecoded)
			}
		})
	}
}

// sealCorpus are results in the plain shape with the secret each leaks,
// for FuzzSealOnBytesMatchesSeal.
var sealCorpus = []struct{ result, secret string }{
	{rawResults["structured"], tokenSecret},
	{rawResults["structured"], digitSecret},
	{rawResults["escaped"], relaySecret},
	{rawResults["iserror"], tokenSecret},
	{rawResults["keyed"], tokenSecret},
	{`{"content":[{"type":"text","text":"a blue team, blueprint, blue."}]}`, "blue"},
	{`{"content":[{"type":"text","text":"x\u2028é-secret-\u003c\u2028y"}]}`, "\u2028é-secret-<\u2028"},
	{`{"content":[{"type":"text","text":"text"}],"resultType":"complete"}`, "complete"},
	{`{"content":[{"type":"text","text":"x"}],"structuredContent":[-98765432109,1.5e-7,"98765432109"]}`, digitSecret},
}

// Masking on the bytes answers exactly what decoding, sealing (today's
// path) and encoding answer, or leaves the result to that path.
func FuzzSealOnBytesMatchesSeal(f *testing.F) {
	for _, c := range sealCorpus {
		f.Add([]byte(c.result), c.secret)
	}
	f.Fuzz(func(t *testing.T, raw []byte, secret string) {
		if _, plain := relay.PlainResult(raw); !plain {
			return
		}
		g := &Gateway{redact: secrets.NewRedactor(secret), log: slog.New(slog.DiscardHandler)}
		got, ok := g.forwardable(extension.RawCallResult(raw))
		if !ok {
			return
		}
		if want := sealedAnswer(t, g, raw); !bytes.Equal(got, want) {
			t.Fatalf("secret %q in %s: masked on the bytes %s, by the seal %s", secret, raw, got, want)
		}
	})
}

// sealedAnswer is today's answer to raw: decoded, sealed, encoded.
func sealedAnswer(t *testing.T, g *Gateway, raw []byte) []byte {
	t.Helper()
	res, err := extension.RawCallResult(raw).Result()
	if err != nil {
		t.Fatalf("%s does not decode: %v", raw, err)
	}
	sealed, err := g.sealed("tools/call", res, nil)
	if err != nil {
		t.Fatalf("the seal withheld %s: %v", raw, err)
	}
	b, err := encodeJSON(sealed)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The corpus's secrets in values are masked on the bytes (a naive
// replacement of the secret's bytes would miss the escaped spellings);
// those in keys, and one whose mask changes the shape, are left to the
// seal.
func TestSealOnBytes(t *testing.T) {
	for i, c := range sealCorpus {
		g := &Gateway{redact: secrets.NewRedactor(c.secret), log: slog.New(slog.DiscardHandler)}
		got, ok := g.forwardable(extension.RawCallResult([]byte(c.result)))
		wantBytes := i != 4 && c.secret != "complete"
		if ok != wantBytes {
			t.Errorf("%s with secret %q: masked on the bytes: %v, want %v", c.result, c.secret, ok, wantBytes)
			continue
		}
		if !ok {
			continue
		}
		if want := sealedAnswer(t, g, []byte(c.result)); !bytes.Equal(got, want) {
			t.Errorf("secret %q: masked on the bytes %s, by the seal %s", c.secret, got, want)
		}
		if bytes.Equal(got, []byte(c.result)) {
			t.Errorf("secret %q: nothing masked in %s", c.secret, got)
		}
	}
}
