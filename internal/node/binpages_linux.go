package node

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// dropBinaryPages unmaps the pages of this program's own read-only
// mappings (code, read-only data, the function tables) from the process, so
// that only what runs afterwards is faulted back in. It returns the bytes
// of the ranges advised.
//
// Why: the one svc binary carries the API, dashboard, operator, CEL and
// Kubernetes client code; their package initialisers and the start touch
// nearly all of its ~70 MB of code and tables (with the kernel's
// fault-around, 16 pages per fault), which an idle node does not use again
// but keeps mapped: measured ~65 MiB of RssFile at rest (issue #27 item 4).
// The pages are clean copies of the file: MADV_DONTNEED on a read-only
// private file mapping only removes them from this process's page tables,
// they stay in the page cache, and code that runs later faults its page
// back (a minor fault). Writable mappings are never advised: there it
// would discard the program's data.
func dropBinaryPages() (int64, error) {
	// The binary's mappings are found by path or by inode: on overlayfs (a
	// container image) the inode in /proc/self/maps may be the lower
	// layer's, not what stat sees. Advising any other read-only file
	// mapping by a chance match of inode numbers would be harmless.
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		return 0, fmt.Errorf("stat own binary: %w", err)
	}
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("own binary: %w", err)
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("read own mappings: %w", err)
	}
	defer f.Close()
	type span struct{ start, end uintptr }
	var spans []span
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 00400000-02978000 r-xp 00000000 fd:01 1234 /path/to/svc
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || strings.Contains(fs[1], "w") || !strings.HasSuffix(fs[1], "p") {
			continue
		}
		ino, err := strconv.ParseUint(fs[4], 10, 64)
		if (err != nil || ino != st.Ino) && strings.Join(fs[5:], " ") != exe {
			continue
		}
		lo, hi, ok := strings.Cut(fs[0], "-")
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(lo, 16, 64)
		b, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || b <= a {
			continue
		}
		spans = append(spans, span{uintptr(a), uintptr(b)})
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read own mappings: %w", err)
	}
	var n int64
	for _, s := range spans {
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, s.start, s.end-s.start, unix.MADV_DONTNEED); e != 0 {
			return n, fmt.Errorf("madvise %#x-%#x: %w", s.start, s.end, e)
		}
		n += int64(s.end - s.start)
	}
	return n, nil
}
