package search

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/model"
)

// noModelAnywhere makes model.Find fail: an empty home, no
// $TOOLGATE_MODEL_DIR and a working folder outside any checkout.
func noModelAnywhere(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv(model.DirEnv, "")
	t.Chdir(t.TempDir())
	if loc, err := model.Find(); err == nil {
		t.Skipf("a model is still found at %s (the test binary sits in a checkout)", loc.Dir)
	}
}

// TestOpenAutoWithoutModelIsLexical: the default mode serves keyword search
// and warns how to install the model, instead of refusing to start.
func TestOpenAutoWithoutModelIsLexical(t *testing.T) {
	noModelAnywhere(t)
	var logs bytes.Buffer
	idx, err := Open(config.Search{Mode: config.SearchAuto}, t.TempDir(), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("auto without the model: %v", err)
	}
	if _, ok := idx.(*Lexical); !ok {
		t.Fatalf("index is %T, want *Lexical", idx)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "toolgate model install") {
		t.Errorf("no warning saying how to install the model:\n%s", logs.String())
	}
}

// TestOpenExplicitSemanticWithoutModelFails: asking for hybrid or dense by
// name never degrades silently.
func TestOpenExplicitSemanticWithoutModelFails(t *testing.T) {
	noModelAnywhere(t)
	for _, mode := range []string{config.SearchHybrid, config.SearchDense} {
		_, err := Open(config.Search{Mode: mode}, t.TempDir(), nil)
		if err == nil || !strings.Contains(err.Error(), "toolgate model install") || !strings.Contains(err.Error(), mode) {
			t.Errorf("mode %s without the model: err = %v, want an error saying to run toolgate model install", mode, err)
		}
	}
	// An explicit model_dir is explicit too, even in auto mode.
	_, err := Open(config.Search{Mode: config.SearchAuto, ModelDir: filepath.Join(t.TempDir(), "none")}, t.TempDir(), nil)
	if err == nil {
		t.Error("auto with a model_dir that does not hold the model: no error")
	}
}

// TestOpenAutoWithModelIsHybrid needs the installed model (run `toolgate
// model install`); TOOLGATE_REQUIRE_MODEL=1 turns its absence into a failure.
func TestOpenAutoWithModelIsHybrid(t *testing.T) {
	loc, err := model.Find()
	if err != nil {
		if os.Getenv("TOOLGATE_REQUIRE_MODEL") == "1" {
			t.Fatalf("TOOLGATE_REQUIRE_MODEL=1 but the model is not installed: %v", err)
		}
		t.Skip(err)
	}
	var logs bytes.Buffer
	idx, err := Open(config.Search{Mode: config.SearchAuto}, t.TempDir(), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer idx.(interface{ Close() error }).Close()
	if _, ok := idx.(*Hybrid); !ok {
		t.Fatalf("index is %T, want *Hybrid", idx)
	}
	if !strings.Contains(logs.String(), "mode=hybrid") || !strings.Contains(logs.String(), loc.Dir) {
		t.Errorf("log does not say hybrid with %s:\n%s", loc.Dir, logs.String())
	}
}
