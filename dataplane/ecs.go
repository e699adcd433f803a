package dataplane

import (
	"net/netip"

	"github.com/svcdns/svc/dataplane/wire"
)

// ecsTrusted reports whether peer is a listeners.ecsClientFrom forwarder,
// whose EDNS Client Subnet option names the client. The list is short (the
// cluster DNS pods' network), so a scan beats any index.
func (s *Server) ecsTrusted(peer netip.Addr) bool {
	for _, p := range s.cfg.ECSClientFrom {
		if p.Contains(peer) {
			return true
		}
	}
	return false
}

// ecsIdentity is the client a trusted forwarder's option names: only a
// full-length source prefix (/32, /128) is one client; a shorter one
// (a forwarder configured with "rewrite edns0 subnet set 24 56") names a
// network, and the forwarder stays the client, counted and logged.
func (s *Server) ecsIdentity(peer netip.AddrPort, e wire.ECS) (netip.AddrPort, bool) {
	if e.FullLength() {
		s.metrics.ecsUsed.Inc()
		return netip.AddrPortFrom(e.Prefix().Addr(), 0), true
	}
	s.metrics.ecsShort.Inc()
	if s.ecsShort.Add(1) <= 10 {
		s.log.Warn("ecs: a trusted forwarder sent a client subnet shorter than one address; the forwarder stays the client (use rewrite edns0 subnet set 32 128)",
			"peer", peer.Addr(), "subnet", e.Prefix())
	}
	return peer, false
}

// applyECS makes the address of a trusted forwarder's ECS option the
// query's client, once per query.
func (s *Server) applyECS(q *Query) {
	if q.ecsChecked {
		return
	}
	q.ecsChecked = true
	if !q.EDNS.ECS.Present || !s.ecsTrusted(q.Client.Addr()) {
		return
	}
	q.Client, q.ecsClient = s.ecsIdentity(q.Client, q.EDNS.ECS)
}

// ecsScope is the SCOPE PREFIX-LENGTH of the ECS option echoed in the
// answer (RFC 7871 7.2.1): the whole source prefix when the option named
// the client, whose policies may make the answer apply to that client
// alone; 0 (valid for any client) when the option was not used.
func (q *Query) ecsScope() uint8 {
	if q.ecsClient {
		return q.EDNS.ECS.Source
	}
	return 0
}
