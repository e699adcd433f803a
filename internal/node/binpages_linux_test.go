package node

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// statusKB reads one "Key:   123 kB" line of /proc/self/status.
func statusKB(t *testing.T, key string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", key)
	return 0
}

// dataProbe lives in the binary's writable data segment (initialised, so
// not bss): advising that mapping would reset it to the file's bytes.
var dataProbe = [4]int64{1, 2, 3, 4}

// The binary's pages the start touched leave the process's resident set,
// and the program keeps its state: the code that runs next faults its pages
// back in, and data written before the drop is still there.
func TestDropBinaryPagesLowersRssFile(t *testing.T) {
	dataProbe[0] = 99
	exe, err := os.Stat("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	before := statusKB(t, "RssFile")
	n, err := dropBinaryPages()
	if err != nil {
		t.Fatal(err)
	}
	after := statusKB(t, "RssFile")
	t.Logf("advised %d MiB of a %d MiB binary; RssFile %d -> %d KiB", n>>20, exe.Size()>>20, before, after)
	// The read-only segments are most of the file (the rest is the
	// writable data and debug sections, which are not loaded).
	if n < exe.Size()/4 {
		t.Errorf("advised %d bytes of a %d-byte binary, want the code and read-only data", n, exe.Size())
	}
	// The test binary's initialisers touched most of its code; what comes
	// back at once is the little that ran since.
	if after > before/2 {
		t.Errorf("RssFile %d KiB after the drop, was %d KiB: want it at most halved", after, before)
	}
	if dataProbe != [4]int64{99, 2, 3, 4} {
		t.Fatalf("writable data after the drop: %v, want [99 2 3 4]", dataProbe)
	}
}
