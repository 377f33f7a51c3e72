package embed

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"sync"
)

// tensor is one entry of a safetensors file, converted to float32.
type tensor struct {
	shape []int
	data  []float32
	half  []uint16 // raw F16 bits instead of data, for tensors kept in half precision
}

type stEntry struct {
	Dtype   string   `json:"dtype"`
	Shape   []int    `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

// parseSafetensors decodes the F16/BF16/F32 tensors of a safetensors file
// (other dtypes, e.g. the I64 position_ids buffer, are skipped). Only
// tensors for which want returns true are returned; F16 tensors for which
// keepHalf returns true are returned as raw half-precision bits.
func parseSafetensors(buf []byte, want, keepHalf func(name string) bool) (map[string]tensor, error) {
	if len(buf) < 8 {
		return nil, fmt.Errorf("truncated safetensors file (%d bytes)", len(buf))
	}
	hlen := binary.LittleEndian.Uint64(buf[:8])
	if hlen == 0 || hlen > uint64(len(buf)-8) || hlen > 100<<20 {
		return nil, fmt.Errorf("invalid safetensors header length %d (file is %d bytes)", hlen, len(buf))
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(buf[8:8+hlen], &header); err != nil {
		return nil, fmt.Errorf("invalid safetensors header: %w", err)
	}
	data := buf[8+hlen:]
	names := make([]string, 0, len(header))
	for name := range header {
		if name != "__metadata__" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := make(map[string]tensor, len(names))
	for _, name := range names {
		var e stEntry
		if err := json.Unmarshal(header[name], &e); err != nil {
			return nil, fmt.Errorf("tensor %s: invalid header entry: %w", name, err)
		}
		var esize int64
		switch e.Dtype {
		case "F16", "BF16":
			esize = 2
		case "F32":
			esize = 4
		default:
			continue
		}
		if !want(name) {
			continue
		}
		n := int64(1)
		for _, d := range e.Shape {
			if d < 0 || d > 1<<28 {
				return nil, fmt.Errorf("tensor %s: invalid shape %v", name, e.Shape)
			}
			n *= int64(d)
		}
		lo, hi := e.Offsets[0], e.Offsets[1]
		if lo < 0 || hi < lo || hi > int64(len(data)) || hi-lo != n*esize {
			return nil, fmt.Errorf("tensor %s: data offsets [%d,%d) invalid for %s%v in %d data bytes", name, lo, hi, e.Dtype, e.Shape, len(data))
		}
		raw := data[lo:hi]
		if e.Dtype == "F16" && keepHalf(name) {
			h := make([]uint16, n)
			for i := range h {
				h[i] = binary.LittleEndian.Uint16(raw[2*i:])
			}
			out[name] = tensor{shape: e.Shape, half: h}
			continue
		}
		f := make([]float32, n)
		switch e.Dtype {
		case "F16":
			f16tab := f16table()
			for i := range f {
				f[i] = f16tab[binary.LittleEndian.Uint16(raw[2*i:])]
			}
		case "BF16":
			for i := range f {
				f[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
			}
		case "F32":
			for i := range f {
				f[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
		}
		out[name] = tensor{shape: e.Shape, data: f}
	}
	return out, nil
}

// f16table maps every IEEE half-precision bit pattern to its float32 value
// (built on first use).
var f16table = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = f16ToF32(uint16(i))
	}
	return &t
})

func f16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		f := float32(man) / 1024 / 16384 // man * 2^-24
		if sign != 0 {
			return -f
		}
		return f
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// f32ToF16 rounds a float32 to the nearest half-precision value (used only
// for fp32 checkpoints; overflow saturates to ±Inf, tiny values flush to 0).
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23&0xff) - 127 + 15
	man := b & 0x7fffff
	switch {
	case exp >= 31:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint32(14 - exp)
		h := uint16(man >> shift)
		if man>>(shift-1)&1 == 1 {
			h++
		}
		return sign | h
	}
	h := sign | uint16(exp)<<10 | uint16(man>>13)
	if man&0x1000 != 0 {
		h++ // round half up; carries into the exponent correctly
	}
	return h
}
