package blocklist

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// legacyMatch is the previous Match (suffix hashes stored in two 128-entry
// arrays, then probed source by source, with a branchy lower-case and a
// bounded probe loop), kept only as the in-run baseline of
// BenchmarkMatchFiveLabels and as a reference for the equivalence test.
func (l *List) legacyMatch(name string) Match {
	const maxLabels = 128
	none := Match{Source: -1}
	if l == nil || l.spec.Disabled || len(l.sources) == 0 {
		return none
	}
	if len(name) > 0 && name[len(name)-1] == '.' {
		name = name[:len(name)-1]
	}
	if len(name) == 0 || len(name) > maxName {
		return none
	}
	var starts [maxLabels]uint8
	var hashes [maxLabels]uint64
	k := 0
	h := uint64(fnvOffset)
	for i := len(name) - 1; i >= 0; i-- {
		c := name[i]
		if c == '.' && k < maxLabels-1 {
			starts[k], hashes[k] = uint8(i+1), mix(h)
			k++
		}
		h = (h ^ uint64(legacyLower(c))) * fnvPrime
	}
	starts[k], hashes[k] = 0, mix(h)
	k++

	block, exc := none, none
	for si, s := range l.sources {
		if s.tab == nil {
			continue
		}
		for j := 0; j < k; j++ {
			st := int(starts[j])
			f, off := s.tab.legacyLookup(name[st:], hashes[j])
			if f == 0 {
				continue
			}
			var b, e uint8
			if st == 0 {
				b, e = f&blockSelf, f&exSelf
			} else {
				b, e = f&blockBelow, f&exBelow
			}
			if b != 0 && !block.Matched {
				block = Match{Matched: true, Source: si, Rule: RuleID{kind: lowestBit(b), plain: f&flagPlain != 0, off: off}}
			}
			if e != 0 && !exc.Exception {
				exc = Match{Exception: true, Source: si, Rule: RuleID{kind: lowestBit(e), off: off}}
			}
		}
	}
	if l.hasRe {
		if !block.Matched && !exc.Exception {
			block = l.matchRe(name, false)
		}
		if block.Matched && !exc.Exception {
			exc = l.matchRe(name, true)
		}
	}
	if exc.Exception && block.Matched {
		return exc
	}
	return block
}

func legacyLower(b byte) byte {
	if b-'A' < 26 {
		return b + ('a' - 'A')
	}
	return b
}

func (t *table) legacyLookup(name string, h uint64) (uint8, uint32) {
	if t == nil || len(t.slots) == 0 {
		return 0, 0
	}
	n := len(t.slots)
	i := slotIndex(h, n)
	fp := fingerprint(h)
	for probes := 0; probes < n; probes++ {
		s := t.slots[i]
		if s == 0 {
			return 0, 0
		}
		if s>>32 == fp {
			off := uint32(s) - 1
			c, p := t.rec(off)
			l := int(c[p])
			if l == len(name) {
				rec := c[p+2 : p+2+l]
				eq := true
				for j := 0; j < l; j++ {
					if rec[j] != legacyLower(name[j]) {
						eq = false
						break
					}
				}
				if eq {
					return c[p+1], off
				}
			}
		}
		i++
		if i == n {
			i = 0
		}
	}
	return 0, 0
}

// TestMatchEqualsLegacy: the single-pass Match decides exactly as the
// previous two-pass one, including which source and rule, across sources
// with overlapping block rules and exceptions.
func TestMatchEqualsLegacy(t *testing.T) {
	bodies := []string{
		"||example.com^\n@@||a.example.com^\n*.b.example.com\nc.example.com\n",
		"||b.example.com^\n@@|example.com^\n||com^\n@@*.x.example.com\n",
		"0.0.0.0 y.a.example.com\n||x.example.com^\n@@||org^\n|example.org^\n",
	}
	var srcs []*Source
	for i, body := range bodies {
		s, err := CompileSource(context.Background(), SourceSpec{Name: fmt.Sprint("s", i)}, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, s)
	}
	labels := []string{"a", "b", "c", "x", "y", "example", "Example", "com", "COM", "org", ""}
	r := rand.New(rand.NewPCG(3, 4))
	for _, perm := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}, {0}, {1}, {2}} {
		var ss []*Source
		for _, i := range perm {
			ss = append(ss, srcs[i])
		}
		l := NewList(ListSpec{Name: "l"}, ss)
		for n := 0; n < 20000; n++ {
			parts := make([]string, 1+r.IntN(6))
			for i := range parts {
				parts[i] = labels[r.IntN(len(labels))]
			}
			name := strings.Join(parts, ".")
			if r.IntN(4) == 0 {
				name += "."
			}
			got, want := l.Match(name), l.legacyMatch(name)
			// Whole: the rule's name is the name asked (lower case, no
			// trailing dot), which the legacy matcher did not report.
			_, ruleName, _ := l.RuleParts(got)
			asked := strings.ToLower(strings.TrimSuffix(name, "."))
			if _, _, ok := l.NameRule(got); got.Whole != (got.Source >= 0 && ruleName == asked) || ok != got.Whole {
				t.Fatalf("sources %v, %q: Whole %v for rule name %q", perm, name, got.Whole, ruleName)
			}
			got.Whole = false
			if got != want {
				t.Fatalf("sources %v, %q: got %+v, want %+v", perm, name, got, want)
			}
		}
	}
}
