package authority

import (
	"sync/atomic"

	"github.com/miekg/dns"
)

// TransferZone is one primary zone of a table as a zone transfer (AXFR,
// IXFR) sends it. It reads the immutable table, so a whole transfer sees
// one serial whatever snapshot is published meanwhile.
type TransferZone struct{ z *zone }

// TransferZone returns the primary zone whose apex is name (lower-cased
// wire format, as the pipeline holds the question); ok is false for names
// that are no zone apex and for forward zones.
func (t *Table) TransferZone(wire []byte) (TransferZone, bool) {
	z := t.zones[string(wire)]
	if z == nil || z.typ != primary {
		return TransferZone{}, false
	}
	return TransferZone{z}, true
}

// TransferZones lists the primary zones (the default zone "." included).
func (t *Table) TransferZones() []TransferZone {
	out := make([]TransferZone, 0, len(t.list))
	for _, z := range t.list {
		if z.typ == primary {
			out = append(out, TransferZone{z})
		}
	}
	return out
}

// Name is the apex in presentation format, lower case, trailing dot.
func (tz TransferZone) Name() string { return tz.z.name }

// Object is the DNSZone's metadata.name.
func (tz TransferZone) Object() string { return tz.z.object }

// Serial is the SOA serial served.
func (tz TransferZone) Serial() uint32 { return tz.z.serial }

// Synced is false while the zone answers SERVFAIL (its data is not loaded).
func (tz TransferZone) Synced() bool { return !tz.z.unsynced }

// Keys are the TSIG key names allowed to transfer the zone
// (spec.policy.transferTSIGKeyRefs); empty means nobody may. Shared with
// the table: do not modify.
func (tz TransferZone) Keys() []string { return tz.z.xfrKeys }

// SOA returns a copy of the zone's SOA record.
func (tz TransferZone) SOA() *dns.SOA { return dns.Copy(tz.z.soa).(*dns.SOA) }

// Records returns the number of records served, apex SOA included.
func (tz TransferZone) Records() int { return tz.z.records }

// SameContent reports whether both were compiled from the same objects
// (a table takes an unchanged zone over from the previous one).
func (tz TransferZone) SameContent(o TransferZone) bool {
	return tz.z != nil && o.z != nil && tz.z.soa == o.z.soa
}

// Each calls f with every record of the zone but the apex SOA, as every
// client is served it: records limited to a view are left out, glue below
// delegations is kept. It stops when f returns false. Records of compact
// sets are built for the call and not kept, so transferring a large zone
// does not leave its records materialised in the table.
func (tz TransferZone) Each(f func(dns.RR) bool) {
	stop := false
	tz.z.nodes.each(func(n *node) {
		if stop {
			return
		}
		for i := range n.sets {
			s := &n.sets[i]
			if s.rtype == dns.TypeSOA {
				continue
			}
			var rrs []dns.RR
			if p := atomic.LoadPointer(&s.rrs); p != nil {
				rrs = *(*[]dns.RR)(p)
			} else if compactType(s.rtype) {
				rrs = s.build(n.name())
			}
			views := s.views()
			for j, rr := range rrs {
				if views != nil && views[j] != "" {
					continue
				}
				if !f(rr) {
					stop = true
					return
				}
			}
		}
	})
}
