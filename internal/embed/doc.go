// Package embed computes sentence embeddings for toolgate's semantic tool
// search: each tool's "{server}__{tool}: {description}. Parameters: ..." text
// and each search query are mapped to a unit-length vector, and tools are
// ranked by cosine similarity (a dot product, since vectors are normalised).
//
// The production implementation, [MiniLM], runs the all-MiniLM-L6-v2
// sentence-transformers model (6-layer BERT, 384 dimensions, mean pooling
// over the attention mask, L2 normalisation, inputs truncated to 256 tokens
// including [CLS] and [SEP]) entirely in Go: it reads the fp16 safetensors
// weights and the Hugging Face tokenizer.json installed by `toolgate model
// install` (package internal/model), and needs neither cgo nor network access
// at run time. On amd64 CPUs with AVX2+FMA the matrix products use
// hand-written assembly kernels; elsewhere a portable Go kernel is used.
//
// [MiniLM.Pooled] gives the same model with more views of one forward pass
// next to the sentence vector (the maximum over the tokens, the mean of the
// third layer), for the poisoning classifier; search keeps the mean.
//
// [MiniLM.Layer] and [MatMul] give code that trains on top of the model
// (bench/poisoning's adapter experiment) one layer's weights and the
// matrix kernels; the gateway does not use them.
//
// [NewHashing] is a deterministic, model-free stand-in for tests that do not
// measure retrieval quality.
package embed
