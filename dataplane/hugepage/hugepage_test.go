package hugepage

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func TestSpan(t *testing.T) {
	for _, c := range []struct{ p, n, lo, hi uintptr }{
		{Size, Size, Size, 2 * Size},
		{Size + 1, 2 * Size, 2 * Size, 3 * Size},
		{Size + 1, 2*Size - 2, 0, 0}, // no whole aligned page inside
		{3*Size - 8, 5 * Size, 3 * Size, 7 * Size},
	} {
		lo, hi := span(c.p, c.n)
		if lo != c.lo || hi != c.hi {
			t.Errorf("span(%#x, %#x) = [%#x, %#x), want [%#x, %#x)", c.p, c.n, lo, hi, c.lo, c.hi)
		}
	}
}

func TestSmallArraysAreLeftAlone(t *testing.T) {
	a := make([]uint64, (Min-1)/8)
	if got := Advise(unsafe.Pointer(&a[0]), len(a)*8); got != 0 {
		t.Fatalf("Advise of %d bytes = %d, want 0", len(a)*8, got)
	}
}

// TestAdviseBacksTheArrayWithHugePages checks what the kernel reports for
// the array's mapping (AnonHugePages in /proc/self/smaps), and that the
// array reads the same after its pages were collapsed.
func TestAdviseBacksTheArrayWithHugePages(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("huge pages by madvise are Linux only")
	}
	if b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil || strings.Contains(string(b), "[never]") {
		t.Skipf("this kernel gives no transparent huge pages (%q, %v)", b, err)
	}
	a := make([]uint64, 12<<20/8)
	for i := range a {
		a[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	p := unsafe.Pointer(&a[0])
	lo, hi := span(uintptr(p), uintptr(len(a)*8))
	got := Advise(p, len(a)*8)
	if got == 0 {
		t.Skip("the kernel refused to collapse (no free huge page, or no MADV_COLLAPSE): nothing to check")
	}
	if got != int(hi-lo) || got < 8<<20 {
		t.Fatalf("Advise = %d bytes, want the aligned part %d (at least 8 MiB of 12)", got, hi-lo)
	}
	for i := range a {
		if a[i] != uint64(i)*0x9e3779b97f4a7c15 {
			t.Fatalf("a[%d] changed by the collapse", i)
		}
	}
	if huge := anonHugeBytes(t, lo); huge < int64(got) {
		t.Fatalf("smaps shows %d bytes of huge pages in the array's mapping, want at least %d", huge, got)
	}
	runtime.KeepAlive(a)
}

// anonHugeBytes returns AnonHugePages of the mapping holding addr.
func anonHugeBytes(t *testing.T, addr uintptr) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if r, _, ok := strings.Cut(line, " "); ok && strings.Contains(r, "-") && !strings.HasSuffix(r, ":") {
			a, b, _ := strings.Cut(r, "-")
			start, err1 := strconv.ParseUint(a, 16, 64)
			end, err2 := strconv.ParseUint(b, 16, 64)
			in = err1 == nil && err2 == nil && uintptr(start) <= addr && addr < uintptr(end)
			continue
		}
		if in && strings.HasPrefix(line, "AnonHugePages:") {
			kb, err := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			if err != nil {
				t.Fatalf("smaps line %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no mapping holds %#x", addr)
	return 0
}
