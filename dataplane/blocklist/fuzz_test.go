package blocklist

import (
	"context"
	"os"
	"strings"
	"testing"
)

func seedLines(f *testing.F) {
	body, err := os.ReadFile("testdata/corpus.txt")
	if err != nil {
		f.Fatal(err)
	}
	for line := range strings.Lines(string(body)) {
		f.Add(strings.TrimRight(line, "\r\n"))
	}
}

// fuzzLine checks the invariants of one line in one format: no panic, every
// emitted name is valid and lower case, and a compiled rule is applied.
func fuzzLine(t *testing.T, format Format, line string) {
	p := lineParser{format: format}
	o := p.parse(line)
	if o != outRules && len(p.rules) != 0 {
		t.Fatalf("outcome %v with %d rules", o, len(p.rules))
	}
	for _, r := range p.rules {
		if r.flags == 0 {
			if !validRegex(r.re) {
				t.Fatalf("invalid regex %q emitted", r.re)
			}
			continue
		}
		n, ok := normName(r.name)
		if !ok || n != r.name {
			t.Fatalf("bad name %q emitted from %q", r.name, line)
		}
	}
	if len(line) > MaxLineBytes || strings.ContainsAny(line, "\n\r") || strings.HasPrefix(line, "\ufeff") {
		return // CompileSource splits or strips such input differently
	}
	src, err := CompileSource(context.Background(), SourceSpec{Name: "f", Format: format}, strings.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	st := src.Status()
	if o == outRules && st.Entries != len(p.rules) {
		t.Fatalf("entries %d, want %d for %q", st.Entries, len(p.rules), line)
	}
	l := NewList(ListSpec{Name: "f"}, []*Source{src})
	for _, r := range p.rules {
		if r.flags&(flagExact|flagSubtree) != 0 && !l.Match(r.name).Matched && !l.Match(r.name).Exception {
			t.Fatalf("rule %q does not match its own name", r.text())
		}
	}
}

func FuzzParseAuto(f *testing.F) {
	seedLines(f)
	f.Fuzz(func(t *testing.T, line string) { fuzzLine(t, FormatAuto, line) })
}

func FuzzParseHosts(f *testing.F) {
	seedLines(f)
	f.Fuzz(func(t *testing.T, line string) { fuzzLine(t, FormatHosts, line) })
}

func FuzzParseDomains(f *testing.F) {
	seedLines(f)
	f.Fuzz(func(t *testing.T, line string) { fuzzLine(t, FormatDomains, line) })
}

func FuzzParseAdblock(f *testing.F) {
	seedLines(f)
	f.Fuzz(func(t *testing.T, line string) { fuzzLine(t, FormatAdblock, line) })
}

func FuzzParseRegex(f *testing.F) {
	seedLines(f)
	f.Fuzz(func(t *testing.T, line string) { fuzzLine(t, FormatRegex, line) })
}

// FuzzMatch feeds arbitrary query names to a list: no panic, and the answer
// ignores case and one trailing dot.
func FuzzMatch(f *testing.F) {
	for _, s := range []string{"ads.example.com", "A.ADS.example.com.", "", ".", "..", "x..ads.example.com", strings.Repeat("a.", 200)} {
		f.Add(s)
	}
	src, err := CompileSource(context.Background(), SourceSpec{Name: "s"},
		strings.NewReader("||ads.example.com^\n@@|ok.ads.example.com^\n*.w.example\n/^x[0-9]/\n"))
	if err != nil {
		f.Fatal(err)
	}
	l := NewList(ListSpec{Name: "l"}, []*Source{src})
	cached, _ := cachedCopy(l)
	f.Fuzz(func(t *testing.T, name string) {
		m := l.Match(name)
		for range 2 { // a miss, then a hit
			if c := cached.Match(name); c != m {
				t.Fatalf("%q: verdict table %+v, Match %+v", name, c, m)
			}
		}
		if m2 := l.Match(strings.ToUpper(name) + "."); !strings.HasSuffix(name, ".") && len(name) < maxName &&
			(m2.Matched != m.Matched || m2.Exception != m.Exception) && strings.ToUpper(name) == asciiUpper(name) {
			t.Fatalf("case or dot changed the verdict of %q", name)
		}
	})
}

func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}
