package node

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/svcdns/svc/internal/settings"
)

// Connection limits. The spec shows no setting for them, so the node
// derives them from what the process may use:
//
//   - descriptors: the file-descriptor limit (Go raises the soft limit to
//     the hard one at start) less a reserve for everything else the process
//     opens (the store, upstream sockets, the API), shared evenly among the
//     stream pools (the data plane's TCP listeners share one, each DoT and
//     DoH listener has its own);
//   - memory, when it is limited (GOMEMLIMIT, or the cgroup's limit in a
//     container): half of it for connections, so that every pool and every
//     DoQ and DoH3 listener full at once still fits, at streamConnCost per
//     stream connection (an idle DoT connection is about 13 KB in the
//     process and a few KB in the kernel) and quicConnCost per QUIC
//     connection (about 55 KB);
//
// each within [minConnsPerPool, maxConnsPerPool]. The data plane and the
// transports default to 1000, which refused the 1001st idle DoT client of
// a node that could hold a hundred times as many.
const (
	fdReserve       = 1024
	minConnsPerPool = 256
	maxConnsPerPool = 65536
	streamConnCost  = 24 << 10
	quicConnCost    = 64 << 10
)

// connLimits are the bounds a node gives its listeners.
type connLimits struct {
	Stream int // per stream pool
	QUIC   int // per DoQ and DoH3 listener
}

// connLimit computes the limits from the descriptor limit (0: unknown),
// the memory limit (0: none), the number of stream pools and of QUIC
// (DoQ and DoH3) listeners.
func connLimit(nofile, mem uint64, pools, quic int) connLimits {
	stream, q := int64(maxConnsPerPool), int64(maxConnsPerPool)
	if nofile > 0 {
		stream = (int64(nofile) - fdReserve) / int64(max(pools, 1))
	}
	if units := int64(pools)*streamConnCost + int64(quic)*quicConnCost; mem > 0 && units > 0 {
		n := int64(min(mem/2, 1<<50)) / units
		stream, q = min(stream, n), n
	}
	clamp := func(n int64) int { return int(min(max(n, minConnsPerPool), maxConnsPerPool)) }
	return connLimits{Stream: clamp(stream), QUIC: clamp(q)}
}

// streamPools counts the connection pools of cfg's stream listeners.
func streamPools(cfg *settings.Config) int {
	n := len(cfg.Listeners.DoT) + len(cfg.Listeners.DoH)
	for _, l := range cfg.Listeners.DNS {
		if len(l.Protocols) == 0 || slices.Contains(l.Protocols, "tcp") {
			return n + 1
		}
	}
	return n
}

// unlimitedMem is where a cgroup limit means "none" (v1 writes the page-
// rounded maximum, v2 "max").
const unlimitedMem = 1 << 60

// memLimit is the memory the process may use: GOMEMLIMIT when set, else
// its cgroup's limit (v2 memory.max, v1 memory.limit_in_bytes) under root
// (the file system root; tests pass another), else 0 for none.
func memLimit(root string) uint64 {
	if v := os.Getenv("GOMEMLIMIT"); v != "" && v != "off" {
		if n, ok := parseGoMemLimit(v); ok {
			return n
		}
	}
	cg, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0
	}
	var v2, v1 string
	sc := bufio.NewScanner(bytes.NewReader(cg))
	for sc.Scan() {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			v1 = parts[2]
		}
	}
	read := func(paths ...string) uint64 {
		for _, p := range paths {
			b, err := os.ReadFile(filepath.Join(root, p))
			if err != nil {
				continue
			}
			s := strings.TrimSpace(string(b))
			if s == "max" {
				return 0
			}
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil || n >= unlimitedMem {
				return 0
			}
			return n
		}
		return 0
	}
	if v1 != "" {
		// In a container the cgroup is mounted at its own root.
		return read(filepath.Join("sys/fs/cgroup/memory", v1, "memory.limit_in_bytes"), "sys/fs/cgroup/memory/memory.limit_in_bytes")
	}
	if v2 != "" {
		return read(filepath.Join("sys/fs/cgroup", v2, "memory.max"), "sys/fs/cgroup/memory.max")
	}
	return 0
}

// parseGoMemLimit reads GOMEMLIMIT's syntax: bytes with an optional B,
// KiB, MiB, GiB or TiB suffix.
func parseGoMemLimit(v string) (uint64, bool) {
	mult := uint64(1)
	for _, u := range []struct {
		suffix string
		m      uint64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if s, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = s, u.m
			break
		}
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return 0, false
	}
	return n * mult, true
}
