package authority

import (
	"slices"

	"github.com/miekg/dns"
)

// Lookup answers qname (wire format, lower-cased by the caller, class IN)
// from the closest enclosing zone. Exact matches without views return
// pre-built answers and allocate nothing; wildcards, CNAME/DNAME chains,
// views, ANY and negative answers for absent names are built per query.
func (t *Table) Lookup(qname []byte, qtype uint16, client Client) Answer {
	var a Answer
	t.LookupWire(qname, qtype, client, &a)
	a.Fill()
	return a
}

// LookupWire is Lookup for a caller that serves the pre-encoded Wire when
// there is one: the Answer section of an exact answer from a compact set
// may be left unbuilt, and the caller calls Fill before it reads the
// sections. It writes the answer into *a: returned by value, the answer
// was copied at each of three calls (about 50 of a 310 ns authoritative
// ServeWire), the copies' 16-byte loads stalling on the 8-byte stores of
// its fields.
func (t *Table) LookupWire(qname []byte, qtype uint16, client Client, a *Answer) {
	*a = Answer{}
	var offs [maxLabels]uint8
	n := labelOffsets(qname, &offs)
	if n == 0 {
		return
	}
	qname = qname[:int(offs[n-1])+1]
	// The zone: the longest suffix that is an apex. (A helper shared with
	// the prefetch, though inlined, made BenchmarkLookup/rootMiss about 10%
	// slower; the prefetch keeps its own copy of these lines.)
	var z *zone
	zl := 0 // label index of the apex within qname
	for i := 0; i < n; i++ {
		if !t.apexLens.has(len(qname) - int(offs[i])) {
			continue
		}
		if z = t.zones[string(qname[offs[i]:])]; z != nil {
			zl = i
			break
		}
	}
	switch {
	case z == nil:
		return
	case z.typ == forward:
		a.Kind, a.ForwardGroup, a.Zone = Forward, z.group, z.name
		return
	case z.access != nil && !z.access.allows(client):
		a.Kind, a.Rcode, a.Zone = Refused, dns.RcodeRefused, z.name
		return
	case z.unsynced:
		a.Kind, a.Rcode, a.Zone = ServFail, dns.RcodeServerFailure, z.name
		return
	case qtype == dns.TypeAXFR || qtype == dns.TypeIXFR:
		// Transfers are served by the transfer handler, never by lookup.
		a.Kind, a.Rcode, a.Zone = Refused, dns.RcodeRefused, z.name
		return
	}

	if !z.hasCuts && !z.hasDNAME {
		if z.plainRoot && !z.nameLens.has(len(qname)) {
			return
		}
		if nd := z.nodes.get(qname); nd != nil {
			z.exact(nd, qname, qtype, client, a)
			return
		}
		if z.plainRoot {
			return // the closest encloser has no wildcard: z.miss answers nothing
		}
		for i := 1; i <= zl; i++ {
			if ce := z.nodes.get(qname[offs[i]:]); ce != nil {
				*a = z.miss(ce, qname, qtype, client)
				return
			}
		}
		*a = z.resolve(qname, qtype, client)
		return
	}
	// Walk down from the apex: a delegation or DNAME above qname wins.
	ce := z.nodes.getString(z.wire)
	for i := zl; i >= 0; i-- {
		nd := z.nodes.get(qname[offs[i]:])
		switch {
		case nd == nil:
			*a = z.miss(ce, qname, qtype, client)
			return
		case i == 0:
			z.exact(nd, qname, qtype, client, a)
			return
		case nd.cut:
			*a = nd.referral.toAnswer(z)
			a.Wire = nil // encoded for the cut's own name only
			return
		case nd.dname >= 0:
			*a = z.resolve(qname, qtype, client)
			return
		}
		ce = nd
	}
	*a = z.resolve(qname, qtype, client)
}

// miss answers a name that does not exist below closest encloser ce without
// building anything unless a wildcard applies.
func (z *zone) miss(ce *node, qname []byte, qtype uint16, client Client) Answer {
	switch {
	case ce.wild != nil:
		if a, ok := z.wildcard(ce.wild, qname, qtype); ok {
			return a
		}
		return z.resolve(qname, qtype, client)
	case z.root:
		return Answer{}
	}
	return z.nxdomain.toAnswer(z)
}

// wildcard answers qname from wildcard node wc with the wildcard's
// pre-encoded blob when the answer is just the synthesised RRset of an A,
// AAAA or TXT set: its owner is the question (a pointer to offset 12), so
// the blob is the same for every name it covers. Only the slow path's
// records are built (owner = qname).
func (z *zone) wildcard(wc *node, qname []byte, qtype uint16) (Answer, bool) {
	if wc.views || wc.cut || wc.below || qtype == dns.TypeANY {
		return Answer{}, false
	}
	s := wc.set(qtype)
	if s == nil || s.extra() != nil || !(compactType(s.rtype) || s.rtype == dns.TypeTXT) {
		return Answer{}, false
	}
	w := s.answerWire()
	if w == nil {
		return Answer{}, false
	}
	owner := presentation(qname)
	var rrs []dns.RR
	if compactType(s.rtype) {
		rrs = s.build(owner)
	} else {
		src := s.records(wc)
		rrs = make([]dns.RR, len(src))
		for i, rr := range src {
			rrs[i] = dns.Copy(rr)
			rrs[i].Header().Name = owner
		}
	}
	return Answer{
		Kind: Answered, Authoritative: true, Answer: rrs, Zone: z.name,
		MinTTL: s.minTTL, Wire: w, Counts: [3]uint16{uint16(len(rrs)), 0, 0},
	}, true
}

// exact answers a name that exists in the zone, from pre-built responses
// when they apply.
// The answer is written into *a, which is zero.
func (z *zone) exact(nd *node, qname []byte, qtype uint16, client Client, a *Answer) {
	switch {
	case nd.cut && qtype != dns.TypeDS:
		*a = nd.referral.toAnswer(z)
		return
	case nd.views, qtype == dns.TypeANY, nd.cname >= 0 && qtype != dns.TypeCNAME:
		*a = z.resolve(qname, qtype, client)
		return
	case z.root && (len(nd.sets) == 0 || nd.wire == z.wire):
		// The default zone only answers names it holds data for.
		return
	}
	if s := nd.set(qtype); s != nil {
		s.answer(z, nd, a)
		return
	}
	*a = nd.nodataAnswer(z)
}

// findKind says where the walk for a name ended.
type findKind uint8

const (
	foundExact findKind = iota
	foundCut            // node is a delegation at or above the name
	foundDNAME          // node owns a DNAME strictly above the name
	foundMiss           // node is the closest encloser
)

// find walks from the apex towards name (which must be in the zone). It
// stops at the first delegation or DNAME above the name; a delegation at the
// name itself is reported as foundCut too.
func (z *zone) find(name []byte) (findKind, *node, int) {
	var offs [maxLabels]uint8
	n := labelOffsets(name, &offs)
	ce := z.nodes.getString(z.wire)
	zl := -1
	for i := 0; i < n; i++ {
		if len(name)-int(offs[i]) == len(z.wire) {
			zl = i
			break
		}
	}
	for i := zl; i >= 0; i-- {
		nd := z.nodes.get(name[offs[i]:])
		switch {
		case nd == nil:
			return foundMiss, ce, 0
		case nd.cut:
			return foundCut, nd, 0
		case i == 0:
			return foundExact, nd, 0
		case nd.dname >= 0:
			return foundDNAME, nd, int(offs[i])
		}
		ce = nd
	}
	return foundExact, ce, 0
}

// chain collects a reply built per query.
type chain struct {
	z              *zone
	qtype          uint16
	client         Client
	answer, ns, ex []dns.RR
	rcode          int
	kind           Kind
	aa             bool
}

func (c *chain) done() Answer {
	if c.kind == 0 {
		c.kind = Answered
	}
	return Answer{
		Kind: c.kind, Rcode: c.rcode, Authoritative: c.aa,
		Answer: slices.Clip(c.answer), Ns: slices.Clip(c.ns), Extra: slices.Clip(c.ex),
		Zone: c.z.name, MinTTL: minTTL(c.answer, c.ns, c.ex),
	}
}

// visible returns the records of set s that the client may see, with owner
// replaced when synthesising from a wildcard.
func (c *chain) visible(s *rrset, nd *node, owner string) []dns.RR {
	if s == nil {
		return nil
	}
	all := s.records(nd)
	out := all
	if views := s.views(); views != nil {
		out = nil
		for i, rr := range all {
			if v := views[i]; v == "" || c.client.in(v) {
				out = append(out, rr)
			}
		}
	}
	if owner == "" || len(out) == 0 {
		return out
	}
	syn := make([]dns.RR, len(out))
	for i, rr := range out {
		syn[i] = dns.Copy(rr)
		syn[i].Header().Name = owner
	}
	return syn
}

// resolve builds the answer for qname step by step (RFC 1034 4.3.2), following
// CNAME and DNAME inside the zone for at most maxChain steps.
func (z *zone) resolve(qname []byte, qtype uint16, client Client) Answer {
	c := &chain{z: z, qtype: qtype, client: client, aa: true}
	name := qname
	owner := presentation(qname)
	visited := make([]string, 0, 4)
	for step := 0; step < maxChain; step++ {
		visited = append(visited, string(name))
		how, nd, off := z.find(name)
		synth := ""
		switch how {
		case foundCut:
			if step == 0 && qtype == dns.TypeDS && nd.wire == string(name) {
				break // DS is answered from the parent side of the cut
			}
			if step > 0 {
				return c.done()
			}
			ns := nd.set(dns.TypeNS)
			c.aa = false
			c.kind = Referral
			c.ns = ns.records(nd)
			c.ex = nd.referral.extra
			return c.done()
		case foundDNAME:
			d := c.visible(&nd.sets[nd.dname], nd, "")
			if len(d) == 0 {
				// Not visible to this client: the name is absent below it.
				return c.negative(step, nd)
			}
			dn := d[0].(*dns.DNAME)
			tw := z0(dn.Target)
			newName := append(append(make([]byte, 0, 256), name[:off]...), tw...)
			c.answer = append(c.answer, dn)
			if len(newName) > 255 || tw == nil {
				c.rcode = dns.RcodeYXDomain
				return c.done()
			}
			lowerWire(newName)
			target := presentation(newName)
			c.answer = append(c.answer, &dns.CNAME{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: dn.Hdr.Ttl}, Target: target})
			if qtype == dns.TypeCNAME || !c.follow(newName, visited) {
				// The synthesised CNAME is itself the answer to a CNAME query.
				return c.done()
			}
			name, owner = newName, target
			continue
		case foundMiss:
			wc := nd.wild
			if wc == nil {
				return c.negative(step, nil)
			}
			nd, synth = wc, owner
		}

		if z.root && (nd.wire == z.wire || len(nd.sets) == 0) {
			if step == 0 {
				return Answer{}
			}
			return c.done()
		}
		if qtype == dns.TypeANY && step == 0 {
			// RFC 8482: one RRset (the lowest type number the client may
			// see) instead of all of them.
			for i := range nd.sets {
				if rrs := c.visible(&nd.sets[i], nd, synth); len(rrs) > 0 {
					c.answer = append(c.answer, rrs...)
					return c.done()
				}
			}
			return c.nodata(step, nd)
		}
		if rrs := c.visible(nd.set(qtype), nd, synth); len(rrs) > 0 {
			c.answer = append(c.answer, rrs...)
			switch qtype {
			case dns.TypeMX, dns.TypeSRV, dns.TypeNS:
				c.ex = z.additional(rrs)
			}
			return c.done()
		}
		if nd.cname >= 0 && qtype != dns.TypeCNAME {
			if rrs := c.visible(&nd.sets[nd.cname], nd, synth); len(rrs) > 0 {
				c.answer = append(c.answer, rrs[0])
				target := rrs[0].(*dns.CNAME).Target
				tw := z0(target)
				if tw == nil {
					return c.done()
				}
				lowerWire(tw)
				if !c.follow(tw, visited) {
					return c.done()
				}
				name, owner = tw, target
				continue
			}
		}
		return c.nodata(step, nd)
	}
	return c.done()
}

// follow reports whether a chain continues at name: inside the zone, not
// seen before.
func (c *chain) follow(name []byte, visited []string) bool {
	if !isSubWire(string(name), c.z.wire) {
		return false
	}
	return !slices.Contains(visited, string(name))
}

func (c *chain) nodata(step int, nd *node) Answer {
	if c.z.root && step == 0 && !c.hasVisible(nd) {
		return Answer{}
	}
	if step == 0 {
		c.kind = NoData
	}
	c.ns = c.z.negSOA
	return c.done()
}

func (c *chain) hasVisible(nd *node) bool {
	for i := range nd.sets {
		if len(c.visible(&nd.sets[i], nd, "")) > 0 {
			return true
		}
	}
	return false
}

// negative ends the chain at an absent name: NXDOMAIN (RFC 6604 keeps the
// rcode of the last name), or nothing from the default zone.
func (c *chain) negative(step int, _ *node) Answer {
	if c.z.root {
		if step == 0 {
			return Answer{}
		}
		return c.done()
	}
	c.rcode = dns.RcodeNameError
	if step == 0 {
		c.kind = NXDomain
	}
	c.ns = c.z.negSOA
	return c.done()
}

// z0 packs a presentation name to wire format, nil when it does not pack.
func z0(name string) []byte {
	buf := make([]byte, 256)
	n, err := dns.PackDomainName(dns.Fqdn(name), buf, 0, nil, false)
	if err != nil {
		return nil
	}
	return buf[:n]
}
