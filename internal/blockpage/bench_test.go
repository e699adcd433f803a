package blockpage

import (
	"fmt"
	"net/http"
	"testing"
)

// BenchmarkPage: one matched page with details and a form token.
func BenchmarkPage(b *testing.B) {
	h := newHarness(b, Decision{Blocked: true, Policy: "default/p", List: "default/l", Rule: "||ads.example^"}, "ads.example")
	h.set.RateLimit = 0
	b.ReportAllocs()
	for b.Loop() {
		if w := h.do(http.MethodGet, "ads.example", "/", "192.0.2.7:1", "", nil); w.Code != http.StatusForbidden {
			b.Fatal(w.Code)
		}
	}
}

// BenchmarkLeafMint: a leaf for a name not in the cache.
func BenchmarkLeafMint(b *testing.B) {
	ca, err := LoadOrCreateCA(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		if _, err := ca.Leaf(fmt.Sprintf("n%d.example", i)); err != nil {
			b.Fatal(err)
		}
	}
}
