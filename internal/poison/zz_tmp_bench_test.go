package poison

import "testing"

func BenchmarkTmpParts(b *testing.B) {
	text := output4KB(-2)
	b.Run("parts", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			Parts(text)
		}
	})
	b.Run("normalize", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			normalize(text, 1<<20)
		}
	})
	b.Run("parseDocument", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			parseDocument(text)
		}
	})
	ps := Parts(text)
	b.Run("ngrams", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for _, p := range ps {
				Ngrams(p, 14)
			}
		}
	})
	b.Logf("%d parts", len(ps))
}
