package querylog

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// The index finds exactly the names put in it, through growth: short
// names, names that differ only in length, and long names that share their
// first 16 bytes or differ only past them.
func TestNameIndexFindsWhatWasPut(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 5))
	var names []string
	for i := range 3000 {
		switch i % 5 {
		case 0:
			names = append(names, fmt.Sprintf("h%d.bench", i))
		case 1:
			names = append(names, strings.Repeat("a", 1+i%40)) // lengths 1..40 of one byte
		case 2:
			names = append(names, fmt.Sprintf("sixteen-bytes-ab%d.example", i)) // a shared 16-byte prefix
		case 3:
			names = append(names, fmt.Sprintf("%s%d", strings.Repeat("long.label.", 8), i))
		default:
			names = append(names, fmt.Sprintf("r%x.example", rng.Uint64()))
		}
	}
	x := newNameIndex(0)
	if x.get("absent.example") != nil {
		t.Fatal("an empty index found a name")
	}
	want := map[string]*hourCount{}
	for i, n := range names {
		if _, dup := want[n]; dup {
			continue
		}
		if x.get(n) != nil {
			t.Fatalf("%q found before it was put", n)
		}
		c := &hourCount{key: n}
		want[n] = c
		x.putHashed(x.hash(n), c)
		if i%97 == 0 {
			for k, c := range want {
				if got := x.get(k); got != c {
					t.Fatalf("after %d names: %q found %v", len(want), k, got)
				}
			}
		}
	}
	for k, c := range want {
		if got := x.get(k); got != c {
			t.Fatalf("%q found %v", k, got)
		}
		for _, other := range []string{k + "x", k[:len(k)-1], "x" + k[1:]} {
			if got, c2 := x.get(other), want[other]; got != c2 {
				t.Fatalf("%q (not %q) found %v, want %v", other, k, got, c2)
			}
		}
	}
	if x.n != len(want) || len(x.slots)*3 < x.n*4 {
		t.Fatalf("%d names in %d slots", x.n, len(x.slots))
	}
}
