// Package suggest finds the candidates closest to a mistyped word: the one
// "did you mean" of the CLI and of the API's write-time validation.
package suggest

import (
	"sort"
	"strings"
)

// Nearest returns at most three candidates close to typed (edit distance at
// most a third of its length, at least 2, or sharing a prefix of 3 and more),
// nearest first, case-insensitively.
func Nearest(typed string, candidates []string) []string {
	t := strings.ToLower(typed)
	limit := max(2, len(t)/3)
	type hit struct {
		s string
		d int
	}
	var hits []hit
	seen := map[string]bool{}
	for _, c := range candidates {
		if seen[c] || c == "" {
			continue
		}
		seen[c] = true
		lc := strings.ToLower(c)
		d := levenshtein(t, lc)
		if d <= limit || (len(t) >= 3 && (strings.HasPrefix(lc, t) || strings.HasPrefix(t, lc))) || (len(t) >= 4 && strings.Contains(lc, t)) {
			hits = append(hits, hit{c, d})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].d < hits[j].d })
	out := make([]string, 0, min(len(hits), 3))
	for i := 0; i < len(hits) && i < 3; i++ {
		out = append(out, hits[i].s)
	}
	return out
}

// DidYouMean is "; did you mean "x" or "y"?" or "" when nothing is close.
func DidYouMean(typed string, candidates []string) string {
	s := Nearest(typed, candidates)
	if len(s) == 0 {
		return ""
	}
	return "; did you mean " + Quoted(s) + "?"
}

// Quoted joins quoted words with commas and a final "or".
func Quoted(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = `"` + w + `"`
	}
	switch len(q) {
	case 0:
		return ""
	case 1:
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
