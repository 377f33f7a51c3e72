package model

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// DirEnv names the environment variable that points at a model folder.
const DirEnv = "TOOLGATE_MODEL_DIR"

// CheckoutSubdir is where the model sits in a toolgate source checkout for
// development (`make model`), relative to the folder holding go.mod.
const CheckoutSubdir = ".cache/models/" + Name

// InstallHint is what every "model not found" message tells the user to run.
const InstallHint = "run `toolgate model install`"

// Where a model folder was found.
const (
	SourceEnv      = "$" + DirEnv
	SourceCache    = "user cache"
	SourceCheckout = "checkout"
)

// Location is a model folder and how it was found.
type Location struct {
	Dir    string `json:"dir"`
	Source string `json:"source"`
}

// CacheDir is the user cache folder for models:
// $XDG_CACHE_HOME/toolgate/models, else ~/.cache/toolgate/models. The XDG
// layout is used on every system (not ~/Library/Caches on macOS) so the
// documented path is the same everywhere; a relative $XDG_CACHE_HOME is
// ignored, as the XDG spec asks.
func CacheDir() (string, error) {
	if x := os.Getenv("XDG_CACHE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "toolgate", "models"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("model: no $XDG_CACHE_HOME and no home folder: %v", err)
	}
	return filepath.Join(home, ".cache", "toolgate", "models"), nil
}

// DefaultInstallDir is where `toolgate model install` puts the model.
func DefaultInstallDir() (string, error) {
	d, err := CacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, Name), nil
}

// Find locates an installed model folder, in this order:
//
//  1. $TOOLGATE_MODEL_DIR, if set: an explicit choice, so it must then hold
//     the model (an error otherwise, never a silent fall-through);
//  2. the user cache folder, [DefaultInstallDir];
//  3. .cache/models/all-MiniLM-L6-v2 in the toolgate checkout holding the
//     working folder, then the one holding the executable (development).
//
// A folder counts when it holds model.fp16.safetensors; Find does not hash
// the files (see [Verify]). The error lists where it looked and says to run
// `toolgate model install`.
func Find() (Location, error) {
	if dir := os.Getenv(DirEnv); dir != "" {
		if err := present(dir); err != nil {
			return Location{}, fmt.Errorf("model: $%s=%s: %v; %s --dir %s, or unset $%s", DirEnv, dir, err, InstallHint, dir, DirEnv)
		}
		return Location{Dir: dir, Source: SourceEnv}, nil
	}
	var looked []string
	if dir, err := DefaultInstallDir(); err == nil {
		if present(dir) == nil {
			return Location{Dir: dir, Source: SourceCache}, nil
		}
		looked = append(looked, dir)
	}
	starts := []string{}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			starts = append(starts, filepath.Dir(exe))
		}
	}
	for _, s := range starts {
		root, ok := checkoutRoot(s)
		if !ok {
			continue
		}
		dir := filepath.Join(root, filepath.FromSlash(CheckoutSubdir))
		if present(dir) == nil {
			return Location{Dir: dir, Source: SourceCheckout}, nil
		}
		looked = append(looked, dir)
	}
	return Location{}, fmt.Errorf("model: %s not installed (looked in %s; $%s is unset); %s", Name, strings.Join(dedup(looked), ", "), DirEnv, InstallHint)
}

// checkoutRoot returns the nearest folder at or above start holding go.mod.
func checkoutRoot(start string) (string, bool) {
	for d := start; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, true
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", false
		}
		d = parent
	}
}

func dedup(s []string) []string {
	var out []string
	for _, v := range s {
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

// present reports why dir does not hold the model weights, or nil.
func present(dir string) error {
	fi, err := os.Stat(filepath.Join(dir, WeightsFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s missing", WeightsFile)
		}
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", WeightsFile)
	}
	return nil
}

// Problem is one file of a model folder that does not check out.
type Problem struct {
	File   string `json:"file"`
	Reason string `json:"reason"`
}

func (p Problem) String() string { return p.File + ": " + p.Reason }

// Verify hashes every file of pin in dir and returns those that are missing
// or differ from the pinned sums; nil means the folder checks out.
func Verify(dir string, pin Pin) []Problem {
	var probs []Problem
	for _, f := range pin.Files {
		sum, err := fileSHA256(filepath.Join(dir, f.Name))
		switch {
		case errors.Is(err, os.ErrNotExist):
			probs = append(probs, Problem{f.Name, "missing"})
		case err != nil:
			probs = append(probs, Problem{f.Name, err.Error()})
		case sum != f.SHA256:
			probs = append(probs, Problem{f.Name, fmt.Sprintf("sha256 %s, want %s", sum, f.SHA256)})
		}
	}
	return probs
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("not a regular file")
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
