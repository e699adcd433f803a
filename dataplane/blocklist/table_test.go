package blocklist

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestChunkedCompact: a source spanning many record chunks with duplicates
// (merged flags) compacts in place and still finds every name.
func TestChunkedCompact(t *testing.T) {
	var b strings.Builder
	const n = 20000 // about 30 bytes a record: several 64 KiB chunks
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "||name-%d.some-longer-domain.example^\n", i)
	}
	for i := 0; i < n; i += 3 {
		fmt.Fprintf(&b, "@@||name-%d.some-longer-domain.example^\n", i)
	}
	s, err := CompileSource(context.Background(), SourceSpec{Name: "s"}, strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.tab.data) < 5 || s.tab.n != n {
		t.Fatalf("chunks %d, names %d", len(s.tab.data), s.tab.n)
	}
	l := NewList(ListSpec{Name: "l"}, []*Source{s})
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("x.name-%d.some-longer-domain.example", i)
		m := l.Match(name)
		if m.Matched == (i%3 == 0) || m.Exception != (i%3 == 0) {
			t.Fatalf("%s: %+v", name, m)
		}
		if want := fmt.Sprintf("name-%d.some-longer-domain.example", i); !strings.Contains(l.RuleText(m), want) {
			t.Fatalf("%s: rule %q", name, l.RuleText(m))
		}
	}
}
