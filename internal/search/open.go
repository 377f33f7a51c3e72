package search

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/embed"
	"github.com/toolgate/toolgate/internal/model"
	"github.com/toolgate/toolgate/internal/state"
)

// Open builds the index a config asks for. Semantic modes load the
// embedding model and keep an embedding cache under stateDir. In mode "auto"
// (the default) a model that is not installed means keyword search with a
// warning saying how to install it; an explicit "hybrid" or "dense" without
// the model is an error that says the same.
func Open(cfg config.Search, stateDir string, log *slog.Logger) (Index, error) {
	return OpenShared(cfg, stateDir, log, nil)
}

// OpenShared is Open for a replica sharing state: the embedding cache is
// also kept in shared's Redis and starts warm from it (see
// VecCache.Share). The index owns shared from then on; nil is Open.
func OpenShared(cfg config.Search, stateDir string, log *slog.Logger, shared *state.Backend) (_ Index, err error) {
	defer func() {
		if shared != nil && err != nil {
			shared.Close()
		}
	}()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mode := cfg.Mode
	if mode == config.SearchLexical {
		log.Info("search index", "mode", mode)
		if shared != nil {
			shared.Close() // no embeddings to share
		}
		return newLexicalIn(stateDir), nil
	}
	dir := cfg.ModelDir
	if dir == "" {
		loc, err := model.Find()
		if err != nil {
			if mode == config.SearchAuto {
				log.Warn("search: the embedding model is not installed, so search is by keywords only; run `toolgate model install` for semantic search", "mode", config.SearchLexical, "reason", err.Error())
				if shared != nil {
					shared.Close()
				}
				return newLexicalIn(stateDir), nil
			}
			return nil, fmt.Errorf("search.mode %q needs the embedding model: %v; or set \"search\": {\"mode\": \"lexical\"} in the config", mode, err)
		}
		dir = loc.Dir
	}
	m, err := embed.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("search: %v (`toolgate model status` checks the installed files)", err)
	}
	if mode == config.SearchAuto {
		mode = config.SearchHybrid
	}
	log.Info("search index", "mode", mode, "model_dir", dir)
	var cache *VecCache
	if stateDir != "" {
		if cache, err = OpenVecCache(filepath.Join(stateDir, "embeddings"), m.ModelID(), m.Dim()); err != nil {
			return nil, err
		}
		if shared != nil {
			n, err := cache.Share(shared)
			if err != nil {
				log.Warn("embedding cache: not warmed from Redis; embedding what the file lacks", "error", err)
			} else {
				log.Info("embedding cache warmed from Redis", "vectors", n)
			}
		}
	} else if shared != nil {
		shared.Close()
	}
	dense := NewDense(m, cache, log)
	if mode == config.SearchDense {
		return &closingDense{dense}, nil
	}
	h := NewHybrid(dense)
	if stateDir != "" {
		h.Lex.Persist(filepath.Join(stateDir, LexicalCacheFile))
	}
	if cfg.DenseWeight != nil {
		h.Weight = *cfg.DenseWeight
	}
	return h, nil
}

// LexicalCacheFile is the lexical index's cache file in the state folder
// (Lexical.Persist).
const LexicalCacheFile = "lexical.cache"

// newLexicalIn is NewLexical keeping its cache in stateDir, if any.
func newLexicalIn(stateDir string) *Lexical {
	l := NewLexical()
	if stateDir != "" {
		l.Persist(filepath.Join(stateDir, LexicalCacheFile))
	}
	return l
}

// closingDense closes the cache with the index.
type closingDense struct{ *Dense }

func (c *closingDense) Close() error {
	err := c.Dense.Close()
	if c.cache != nil {
		if cerr := c.cache.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Background is implemented by indexes that embed in the background.
type Background interface {
	// Pending is the number of documents not embedded yet.
	Pending() int
	// Wait blocks until nothing is pending or ctx ends.
	Wait(ctx context.Context) error
}
