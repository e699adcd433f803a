package blocklist

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/svcdns/svc/dataplane/hugepage"
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

// TestLargeTablesAskForHugePages: a table of a million names is read at
// random, so its filter and slots are backed by 2 MiB pages where the kernel gives
// them (see hugepage.Advise), and it finds every name afterwards.
func TestLargeTablesAskForHugePages(t *testing.T) {
	probe := make([]byte, 8<<20)
	for i := range probe {
		probe[i] = byte(i)
	}
	if hugepage.Advise(unsafe.Pointer(&probe[0]), len(probe)) == 0 {
		t.Skip("this machine gives no huge pages to madvise: nothing to check")
	}
	var b strings.Builder
	const n = 400000
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "name-%d.some-longer-domain.example\n", i)
	}
	s, err := CompileSource(context.Background(), SourceSpec{Name: "s"}, strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	// Filter and slots: 0.5 + 4.6 MiB, at least one aligned 2 MiB page.
	if s.tab.huge < 2<<20 {
		t.Fatalf("%d bytes of the table on huge pages, want at least 2 MiB of the %d bytes of filter and slots",
			s.tab.huge, 8*(len(s.tab.filter)+len(s.tab.slots)))
	}
	l := NewList(ListSpec{Name: "l"}, []*Source{s})
	for i := 0; i < n; i += 7 {
		if name := fmt.Sprintf("name-%d.some-longer-domain.example", i); !l.Match(name).Matched {
			t.Fatalf("%s not matched after the collapse", name)
		}
	}
}
