package node

import (
	"slices"

	"github.com/svcdns/svc/internal/settings"
)

// Connection limits. The spec shows no setting for them, so the node
// derives one: as many connections per stream listener as the process's
// file-descriptor limit allows (Go raises the soft limit to the hard one
// at start), after a reserve for everything else the process opens (the
// store, upstream sockets, the API), shared evenly among the stream
// listeners' pools, within [minConnsPerPool, maxConnsPerPool]. DoQ has no
// descriptor per connection and takes the same number. The data plane and
// the transports default to 1000, which would refuse the 1001st idle DoT
// client of a node that could hold a hundred times as many.
const (
	fdReserve       = 1024
	minConnsPerPool = 256
	maxConnsPerPool = 65536
)

// connLimit returns the bound on concurrent connections of each stream
// listener pool, given the descriptor limit (0: unknown) and the number of
// pools: the data plane's TCP listeners share one, each DoT and DoH
// listener has its own.
func connLimit(nofile uint64, pools int) int {
	if nofile == 0 {
		return maxConnsPerPool
	}
	pools = max(pools, 1)
	per := (int64(nofile) - fdReserve) / int64(pools)
	return int(min(max(per, minConnsPerPool), maxConnsPerPool))
}

// streamPools counts the connection pools of cfg's listeners.
func streamPools(cfg *settings.Config) int {
	n := len(cfg.Listeners.DoT) + len(cfg.Listeners.DoH)
	for _, l := range cfg.Listeners.DNS {
		if len(l.Protocols) == 0 || slices.Contains(l.Protocols, "tcp") {
			return n + 1
		}
	}
	return n
}
