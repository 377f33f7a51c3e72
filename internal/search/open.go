package search

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/embed"
)

// Open builds the index a config asks for. Semantic modes load the
// embedding model and keep an embedding cache under stateDir; a missing
// model is an error that says how to install it, never a silent downgrade
// to keyword search.
func Open(cfg config.Search, stateDir string, log *slog.Logger) (Index, error) {
	if cfg.Mode == config.SearchLexical {
		return NewLexical(), nil
	}
	dir := cfg.ModelDir
	if dir == "" {
		var err error
		if dir, err = embed.DefaultDir(); err != nil {
			return nil, fmt.Errorf("search.mode %q needs the embedding model: %v; or set \"search\": {\"mode\": \"lexical\"} in the config", cfg.Mode, err)
		}
	}
	m, err := embed.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("search: %v", err)
	}
	var cache *VecCache
	if stateDir != "" {
		if cache, err = OpenVecCache(filepath.Join(stateDir, "embeddings"), m.ModelID(), m.Dim()); err != nil {
			return nil, err
		}
	}
	dense := NewDense(m, cache, log)
	if cfg.Mode == config.SearchDense {
		return &closingDense{dense}, nil
	}
	h := NewHybrid(dense)
	if cfg.DenseWeight != nil {
		h.Weight = *cfg.DenseWeight
	}
	return h, nil
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
