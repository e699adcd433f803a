package upstream

import (
	"net/netip"

	"github.com/miekg/dns"
)

// ednsUDPSize is the buffer size advertised when an OPT record is added:
// the DNS flag day 2020 value that avoids IP fragmentation.
const ednsUDPSize = 1232

// prepared is the outgoing form of a client query.
type prepared struct {
	msg       dns.Msg // shallow copy of the client's message, Extra maybe replaced
	addedOPT  bool    // we added an OPT the client did not send
	stripResp bool    // remove ECS from the answer (client did not send what we sent)
}

// prepare applies the ECS mode without modifying req: the copy shares the
// question and record slices, and only a changed OPT record is new.
func (r *Resolver) prepare(req *dns.Msg, client netip.Addr) prepared {
	p := prepared{msg: *req}
	mode := r.cfg.ECS.Mode
	if mode == ECSForward {
		return p
	}
	p.stripResp = true
	optIdx := -1
	for i, rr := range req.Extra {
		if _, ok := rr.(*dns.OPT); ok {
			optIdx = i
			break
		}
	}
	var ecs *dns.EDNS0_SUBNET
	if mode == ECSAdd {
		ecs = r.clientSubnet(client)
	}
	if optIdx < 0 {
		if ecs == nil {
			return p
		}
		opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		opt.SetUDPSize(ednsUDPSize)
		opt.Option = []dns.EDNS0{ecs}
		extra := make([]dns.RR, len(req.Extra), len(req.Extra)+1)
		copy(extra, req.Extra)
		p.msg.Extra = append(extra, opt)
		p.addedOPT = true
		return p
	}
	old := req.Extra[optIdx].(*dns.OPT)
	hasECS := false
	for _, o := range old.Option {
		if o.Option() == dns.EDNS0SUBNET {
			hasECS = true
			break
		}
	}
	if !hasECS && ecs == nil {
		return p // nothing to change: no allocation on the common path
	}
	opt := &dns.OPT{Hdr: old.Hdr}
	opt.Option = make([]dns.EDNS0, 0, len(old.Option)+1)
	for _, o := range old.Option {
		if o.Option() != dns.EDNS0SUBNET {
			opt.Option = append(opt.Option, o)
		}
	}
	if ecs != nil {
		opt.Option = append(opt.Option, ecs)
	}
	extra := make([]dns.RR, len(req.Extra))
	copy(extra, req.Extra)
	extra[optIdx] = opt
	p.msg.Extra = extra
	return p
}

// clientSubnet is the ECS option for the client address truncated to the
// configured prefix, or nil when the address is unknown.
func (r *Resolver) clientSubnet(client netip.Addr) *dns.EDNS0_SUBNET {
	if !client.IsValid() {
		return nil
	}
	client = client.Unmap().WithZone("")
	bits, family := r.cfg.ECS.IPv4Prefix, uint16(1)
	if client.Is6() {
		bits, family = r.cfg.ECS.IPv6Prefix, 2
	}
	pfx, err := client.Prefix(bits)
	if err != nil {
		return nil
	}
	return &dns.EDNS0_SUBNET{
		Code:          dns.EDNS0SUBNET,
		Family:        family,
		SourceNetmask: uint8(bits),
		Address:       pfx.Addr().AsSlice(),
	}
}

// finish turns the upstream answer into the client's: its ID, and no OPT or
// ECS the client did not ask for (RFC 6891 6.1.1, RFC 7871 7.2.2).
func (p *prepared) finish(resp *dns.Msg, id uint16) {
	resp.Id = id
	if !p.addedOPT && !p.stripResp {
		return
	}
	for i, rr := range resp.Extra {
		opt, ok := rr.(*dns.OPT)
		if !ok {
			continue
		}
		if p.addedOPT {
			resp.Extra = append(resp.Extra[:i], resp.Extra[i+1:]...)
			return
		}
		kept := opt.Option[:0]
		for _, o := range opt.Option {
			if o.Option() != dns.EDNS0SUBNET {
				kept = append(kept, o)
			}
		}
		opt.Option = kept
		return
	}
}
