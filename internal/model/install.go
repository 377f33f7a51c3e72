package model

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// RegistryEnv overrides the npm registry the tarball is fetched from.
const RegistryEnv = "TOOLGATE_NPM_REGISTRY"

// DefaultRegistry is the public npm registry.
const DefaultRegistry = "https://registry.npmjs.org/"

// Limits on what an archive may make us read or write. The pinned tarball is
// checked by size and sha256 before it is opened, so these only matter for a
// pin of a test's own; they keep a hostile archive from filling the disk.
const (
	maxUnpacked = 512 << 20 // bytes decompressed from the whole archive
	maxFileSize = 256 << 20 // bytes of one installed file
	maxEntries  = 10000     // archive entries read
)

// Registry returns the npm registry base URL: $TOOLGATE_NPM_REGISTRY, else
// npm's own $npm_config_registry / $NPM_CONFIG_REGISTRY (what `npm config`
// exports), else the public registry. It must be https.
func Registry() (string, error) {
	reg, from := DefaultRegistry, ""
	for _, env := range []string{RegistryEnv, "npm_config_registry", "NPM_CONFIG_REGISTRY"} {
		if v := os.Getenv(env); v != "" {
			reg, from = v, "$"+env+": "
			break
		}
	}
	u, err := url.Parse(reg)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("model: %sregistry %q is not a URL", from, reg)
	}
	if u.Scheme != "https" {
		return "", fmt.Errorf("model: %sregistry %q: only https registries are used", from, reg)
	}
	return reg, nil
}

// TarballURL joins the registry base URL and the pin's tarball path.
func TarballURL(registry string, pin Pin) string {
	return strings.TrimSuffix(registry, "/") + pin.TarballPath()
}

// Options configures [Install].
type Options struct {
	// Dir is the folder to install into (default [DefaultInstallDir]).
	Dir string
	// From is a local .tgz to install from instead of downloading.
	From string
	// Registry is the npm registry base URL (default [Registry]).
	Registry string
	// Client fetches the tarball (default: a client that follows https
	// redirects only).
	Client *http.Client
	// Pin is what to install (default [Pinned]).
	Pin *Pin
	// Force reinstalls even when Dir already checks out.
	Force bool
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
}

// Result says what Install did.
type Result struct {
	Dir string `json:"dir"`
	// Source is the URL or file the model came from; empty when the folder
	// already checked out and nothing was done.
	Source         string `json:"source,omitempty"`
	AlreadyPresent bool   `json:"already_present"`
}

// Install fetches the pinned tarball (or reads opts.From), checks its size
// and sha256, unpacks the model's files into a temporary folder beside the
// destination, checks each file's sha256, and only then renames the folder
// into place. On any error nothing is installed and the temporary files are
// removed.
func Install(ctx context.Context, opts Options) (Result, error) {
	pin := Pinned()
	if opts.Pin != nil {
		pin = *opts.Pin
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	dir := opts.Dir
	if dir == "" {
		var err error
		if dir, err = DefaultInstallDir(); err != nil {
			return Result{}, err
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return Result{}, fmt.Errorf("model: --dir: %v", err)
	}
	res := Result{Dir: dir}
	if !opts.Force {
		if _, err := os.Stat(dir); err == nil && Verify(dir, pin) == nil {
			res.AlreadyPresent = true
			return res, nil
		}
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return Result{}, fmt.Errorf("model: %v", err)
	}
	stage, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return Result{}, fmt.Errorf("model: %v", err)
	}
	defer os.RemoveAll(stage) // a no-op once renamed into place

	var tgz *os.File
	if opts.From != "" {
		res.Source = opts.From
		if tgz, err = os.Open(opts.From); err != nil {
			return Result{}, fmt.Errorf("model: --from: %v", err)
		}
	} else {
		reg := opts.Registry
		if reg == "" {
			if reg, err = Registry(); err != nil {
				return Result{}, err
			}
		}
		res.Source = TarballURL(reg, pin)
		fmt.Fprintf(progress, "downloading %s (%.1f MiB)\n", res.Source, float64(pin.Size)/(1<<20))
		if tgz, err = download(ctx, opts.Client, res.Source, pin.Size, filepath.Join(stage, "download.tgz")); err != nil {
			return Result{}, err
		}
	}
	defer tgz.Close()
	if err := checkTarball(tgz, pin); err != nil {
		return Result{}, fmt.Errorf("model: %s: %v; refusing to install", res.Source, err)
	}
	fmt.Fprintf(progress, "checked %s: sha256 %s\n", filepath.Base(res.Source), pin.SHA256)
	if _, err := tgz.Seek(0, io.SeekStart); err != nil {
		return Result{}, fmt.Errorf("model: %v", err)
	}
	files := filepath.Join(stage, "files")
	if err := os.Mkdir(files, 0o755); err != nil {
		return Result{}, fmt.Errorf("model: %v", err)
	}
	if err := extract(tgz, pin, files); err != nil {
		return Result{}, fmt.Errorf("model: %s: %v; refusing to install", res.Source, err)
	}
	if err := os.WriteFile(filepath.Join(files, NoticeFile), notice, 0o644); err != nil {
		return Result{}, fmt.Errorf("model: %v", err)
	}
	if err := syncDir(files); err != nil {
		return Result{}, fmt.Errorf("model: %v", err)
	}
	if err := replaceDir(files, dir, pin); err != nil {
		return Result{}, err
	}
	if probs := Verify(dir, pin); probs != nil {
		return Result{}, fmt.Errorf("model: %s after install: %s", dir, probs[0])
	}
	return res, nil
}

// download saves url to dst, reading at most size+1 bytes, and returns the
// file open for reading.
func download(ctx context.Context, client *http.Client, url string, size int64, dst string) (*os.File, error) {
	if client == nil {
		client = &http.Client{
			Timeout: 15 * time.Minute,
			CheckRedirect: func(req *http.Request, via []*http.Request) error {
				if req.URL.Scheme != "https" {
					return fmt.Errorf("refusing a redirect to %s", req.URL.Redacted())
				}
				if len(via) >= 5 {
					return errors.New("too many redirects")
				}
				return nil
			},
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("model: %v", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("model: download: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("model: GET %s: %s", url, resp.Status)
	}
	if resp.ContentLength > size {
		return nil, fmt.Errorf("model: GET %s: %d bytes, want the pinned %d; refusing to install", url, resp.ContentLength, size)
	}
	f, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("model: %v", err)
	}
	if _, err := io.Copy(f, io.LimitReader(resp.Body, size+1)); err != nil {
		f.Close()
		return nil, fmt.Errorf("model: download %s: %v", url, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("model: %v", err)
	}
	return f, nil
}

// checkTarball compares f's size and sha256 with the pin.
func checkTarball(f *os.File, pin Pin) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	if fi.Size() != pin.Size {
		return fmt.Errorf("%d bytes, want the pinned %d (%s@%s)", fi.Size(), pin.Size, pin.Package, pin.Version)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, pin.Size+1)); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != pin.SHA256 {
		return fmt.Errorf("sha256 %s, want the pinned %s (%s@%s)", got, pin.SHA256, pin.Package, pin.Version)
	}
	return nil
}

// extract writes the pin's files from the gzipped tar r into dir, under
// their own names (never a name taken from the archive). An entry whose
// path leaves the package (absolute, or with a ".." element), a wanted entry
// that is not a regular file or appears twice, and any file over the size
// limits or whose sha256 differs from the pin fail the whole archive.
func extract(r io.Reader, pin Pin, dir string) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("not a gzip file: %v", err)
	}
	defer gz.Close()
	want := map[string]File{}
	for _, f := range pin.Files {
		want[f.TarPath] = f
	}
	done := map[string]bool{}
	tr := tar.NewReader(&capReader{r: gz, left: maxUnpacked})
	for n := 0; ; n++ {
		if n == maxEntries {
			return fmt.Errorf("more than %d archive entries", maxEntries)
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading archive: %v", err)
		}
		if err := checkEntryName(hdr.Name); err != nil {
			return err
		}
		f, ok := want[path.Clean(hdr.Name)]
		if !ok {
			continue
		}
		if hdr.Typeflag != tar.TypeReg {
			return fmt.Errorf("archive entry %q is not a regular file", hdr.Name)
		}
		if done[f.Name] {
			return fmt.Errorf("archive entry %q appears twice", hdr.Name)
		}
		if hdr.Size < 0 || hdr.Size > maxFileSize {
			return fmt.Errorf("archive entry %q: %d bytes is over the %d limit", hdr.Name, hdr.Size, maxFileSize)
		}
		if err := writeFile(filepath.Join(dir, f.Name), tr, hdr.Size, f.SHA256); err != nil {
			return fmt.Errorf("archive entry %q: %v", hdr.Name, err)
		}
		done[f.Name] = true
	}
	for _, f := range pin.Files {
		if !done[f.Name] {
			return fmt.Errorf("archive has no %s", f.TarPath)
		}
	}
	return nil
}

// checkEntryName refuses archive paths that would leave the folder they are
// unpacked into, whether or not toolgate wants the entry: such an archive
// was not made by npm pack.
func checkEntryName(name string) error {
	if name == "" || strings.ContainsRune(name, 0) {
		return fmt.Errorf("archive entry %q: invalid name", name)
	}
	n := strings.ReplaceAll(name, `\`, "/")
	if path.IsAbs(n) || filepath.IsAbs(name) || (len(n) >= 2 && n[1] == ':') {
		return fmt.Errorf("archive entry %q: absolute path", name)
	}
	for _, el := range strings.Split(n, "/") {
		if el == ".." {
			return fmt.Errorf("archive entry %q: path leaves the package folder", name)
		}
	}
	return nil
}

// writeFile creates dst (which must not exist) with exactly size bytes from
// r and checks their sha256.
func writeFile(dst string, r io.Reader, size int64, sum string) error {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(r, size))
	if err == nil && n != size {
		err = fmt.Errorf("truncated: %d of %d bytes", n, size)
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("sha256 %s, want the pinned %s", got, sum)
	}
	return nil
}

// replaceDir moves the checked folder src to dst. A dst that does not check
// out is moved aside first and removed after; if another installer put a
// good dst in place meanwhile, that one is kept.
func replaceDir(src, dst string, pin Pin) error {
	err := os.Rename(src, dst)
	if err == nil {
		return nil
	}
	if _, serr := os.Lstat(dst); serr != nil {
		return fmt.Errorf("model: install into %s: %v", dst, err)
	}
	if Verify(dst, pin) == nil {
		return nil // a concurrent install won
	}
	old := src + ".old"
	if err := os.Rename(dst, old); err != nil {
		return fmt.Errorf("model: moving the old %s aside: %v", dst, err)
	}
	if err := os.Rename(src, dst); err != nil {
		if rerr := os.Rename(old, dst); rerr != nil {
			return fmt.Errorf("model: install into %s: %v (and the old folder is left at %s: %v)", dst, err, old, rerr)
		}
		return fmt.Errorf("model: install into %s: %v", dst, err)
	}
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("model: installed into %s but could not remove the old files at %s: %v", dst, old, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	// Some file systems cannot sync a folder; the files themselves are synced.
	_ = d.Sync()
	return nil
}

// capReader fails once more than left bytes have been read.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, fmt.Errorf("archive unpacks to more than %d bytes", maxUnpacked)
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}
