package embed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ModelDirEnv names the environment variable that overrides where the model
// files are looked up.
const ModelDirEnv = "TOOLGATE_MODEL_DIR"

// DefaultSubdir is where `make model` (scripts/model/install.sh) installs
// the model, relative to the repository root.
const DefaultSubdir = ".cache/models/all-MiniLM-L6-v2"

// DefaultDir locates the installed model directory:
//
//  1. $TOOLGATE_MODEL_DIR, if set (it must then contain the model);
//  2. otherwise .cache/models/all-MiniLM-L6-v2 in the nearest directory,
//     starting from the current one and walking up, that contains go.mod
//     (the toolgate repository root);
//  3. otherwise the same walk starting from the executable's folder, so
//     bin/toolgate finds its checkout's model whatever the working folder
//     (an MCP client may start it anywhere).
//
// The directory counts as present when it holds model.fp16.safetensors. If
// none is found the error tells the user to run `make model`.
func DefaultDir() (string, error) {
	if dir := os.Getenv(ModelDirEnv); dir != "" {
		if err := checkModelDir(dir); err != nil {
			return "", fmt.Errorf("embed: $%s=%s: %w (run `make model` or `scripts/model/install.sh %s`)", ModelDirEnv, dir, err, dir)
		}
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("embed: locating model: %w", err)
	}
	dir, werr := walkUp(wd)
	if werr == nil {
		return dir, nil
	}
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			if dir, err := walkUp(filepath.Dir(exe)); err == nil {
				return dir, nil
			}
		}
	}
	return "", werr
}

// walkUp looks for the model in the checkout containing start.
func walkUp(start string) (string, error) {
	wd := start
	for d := wd; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			dir := filepath.Join(d, filepath.FromSlash(DefaultSubdir))
			if err := checkModelDir(dir); err != nil {
				return "", fmt.Errorf("embed: model not installed in %s: %w; run `make model` (or set $%s)", dir, err, ModelDirEnv)
			}
			return dir, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	return "", fmt.Errorf("embed: model not found: $%s is unset and no go.mod above %s; run `make model` in the toolgate repository or set $%s", ModelDirEnv, wd, ModelDirEnv)
}

func checkModelDir(dir string) error {
	fi, err := os.Stat(filepath.Join(dir, weightsFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s missing", weightsFile)
		}
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s is a directory", weightsFile)
	}
	return nil
}

const (
	weightsFile   = "model.fp16.safetensors"
	tokenizerFile = "tokenizer.json"
	configFile    = "config.json"
)
