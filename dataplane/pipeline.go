package dataplane

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/dataplane/cache"
	"github.com/svcdns/svc/dataplane/upstream"
	"github.com/svcdns/svc/dataplane/wire"
)

type stage struct {
	name string
	run  func(*Server, *Query) stageResult
}

// stageIndex is the index of the named stage in stages.
func stageIndex(stages []stage, name string) int {
	for i, st := range stages {
		if st.name == name {
			return i
		}
	}
	panic("no stage " + name)
}

// buildPipeline is the one place the stage order is decided (spec: ingress,
// identify, control, local, authoritative, blocking, cache, upstream, log).
func buildPipeline() []stage {
	return []stage{
		// ingress first: nothing else may look at bytes that were not validated.
		{"ingress", stageIngress},
		// identify before any decision, because groups select policies and views.
		{"identify", stageIdentify},
		// control before data: health checks and node toggles must work whatever the zones say.
		{"control", stageControl},
		// local rewrites override zones and upstreams for the clients they name.
		{"local", stageLocal},
		// authoritative before blocking: our own zones are never blocked or forwarded.
		{"authoritative", stageAuthoritative},
		// blocking before cache, so a list change applies at once to cached names.
		{"blocking", stageBlocking},
		// cache only in front of upstream: it holds nothing else.
		{"cache", stageCache},
		// upstream last resort: the only stage that leaves the process.
		{"upstream", stageUpstream},
		// log always runs, whatever answered, so every query is counted.
		{"log", stageLog},
	}
}

// run executes stages from q.next. It returns false when the query detached
// to another goroutine, which then owns it. A panic in a stage is contained
// to its query (see contain): one bad packet or snapshot must not take every
// other client's answers down with the process.
func (s *Server) run(q *Query) (done bool) {
	last := len(s.stages) - 1
	i := q.next
	defer func() {
		if v := recover(); v != nil {
			done = s.contain(q, i, last, v)
		}
	}()
	for ; i < last; i++ {
		switch s.stages[i].run(s, q) {
		case stageNext:
			continue
		case stageDetach:
			q.next = i
			return false
		case stageAwait:
			return false // q belongs to the async lane now: not touched
		case stageDrop:
			q.Status = StatusDropped
			q.fast, q.resp = fastNone, nil
		}
		break
	}
	i = last
	s.stages[last].run(s, q)
	return true
}

// contain turns a panic in stage i into a SERVFAIL for this query, counts
// it by stage, logs it with its stack (at most once a second: a packet
// that triggers a panic can be sent in a flood), and still runs the log
// stage unless that is the one that panicked.
func (s *Server) contain(q *Query, i, last int, v any) bool {
	name := s.stages[i].name
	s.metrics.panicked(i)
	if s.panicLog.allow(time.Now()) {
		s.log.Error("query stage panicked; answered SERVFAIL", "stage", name, "qname", q.Name,
			"panic", fmt.Sprint(v), "suppressed", s.panicLog.takeSuppressed(), "stack", string(debug.Stack()))
	}
	q.fail(StatusFailed, ReasonInternal, dns.RcodeServerFailure)
	if q.Name == nil {
		// no question parsed yet: answer with the header alone, as
		// ingress does for what it cannot parse (the ID may not be read yet)
		q.qend = wire.HeaderLen
		if len(q.in) >= 2 {
			q.ID = binary.BigEndian.Uint16(q.in)
		}
	} else if i < last {
		// the slow path carries the EDE saying where it failed
		q.resp = q.newResponse(dns.RcodeServerFailure, false)
		q.fast = fastNone
		q.ede = &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeOther, ExtraText: "internal error in stage " + name + "; see the node log"}
	}
	if i < last {
		func() {
			defer func() {
				if v := recover(); v != nil {
					s.metrics.panicked(last)
				}
			}()
			s.stages[last].run(s, q)
		}()
	}
	return true
}

// rateGate lets one event through per second and counts the rest.
type rateGate struct {
	mu         sync.Mutex
	next       time.Time
	suppressed int
}

func (g *rateGate) allow(now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.Before(g.next) {
		g.suppressed++
		return false
	}
	g.next = now.Add(time.Second)
	return true
}

func (g *rateGate) takeSuppressed() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.suppressed
	g.suppressed = 0
	return n
}

// ingress parses the header and question from the wire (RFC 1035, 6891).
func stageIngress(s *Server, q *Query) stageResult {
	b := q.in
	h, err := wire.ParseHeader(b)
	if err != nil || h.Flags&wire.FlagQR != 0 {
		return stageDrop // too short to answer, or a response: never reflect
	}
	q.ID, q.Flags = h.ID, h.Flags
	if h.Opcode() == dns.OpcodeNotify {
		return s.notifyReceived(q, h)
	}
	if h.Opcode() != dns.OpcodeQuery {
		q.qend = wire.HeaderLen
		if h.QD == 1 {
			if qq, err := wire.ParseQuestion(b, wire.HeaderLen, &q.lowerBuf); err == nil {
				q.setQuestion(qq)
			}
		}
		return q.fail(StatusMalformed, ReasonNotImp, dns.RcodeNotImplemented)
	}
	if h.QD != 1 {
		q.qend = wire.HeaderLen
		return q.fail(StatusMalformed, ReasonFormErr, dns.RcodeFormatError)
	}
	qq, err := wire.ParseQuestion(b, wire.HeaderLen, &q.lowerBuf)
	if errors.Is(err, wire.ErrPointer) {
		return s.ingressSlow(q)
	}
	if err != nil {
		q.qend = wire.HeaderLen
		return q.fail(StatusMalformed, ReasonFormErr, dns.RcodeFormatError)
	}
	q.setQuestion(qq)
	if _, err := wire.ParseRecordsInto(b, qq.End, h.AN, h.NS, h.AR, &q.EDNS); err != nil {
		q.EDNS = wire.EDNS{} // answered as a query whose records were not read
		return q.fail(StatusMalformed, ReasonFormErr, dns.RcodeFormatError)
	}
	e := &q.EDNS
	q.padding, q.keepalive = e.Padding, e.Keepalive
	q.signed = h.AR > 1 || (h.AR == 1 && !e.Present)
	if e.Present && e.Version > 0 {
		q.EDNS.DO, q.EDNS.ECS = false, wire.ECS{}
		return q.fail(StatusMalformed, ReasonBadVers, dns.RcodeBadVers)
	}
	if e.ECSBad {
		// RFC 7871 7.2.1: a malformed option is a FORMERR, not ignored.
		return q.fail(StatusMalformed, ReasonFormErr, dns.RcodeFormatError)
	}
	if e.KeepaliveData && q.Transport.Stream() {
		// RFC 7828 3.2.1: only servers send a TIMEOUT.
		return q.fail(StatusMalformed, ReasonFormErr, dns.RcodeFormatError)
	}
	if (q.Type == dns.TypeAXFR || q.Type == dns.TypeIXFR) && q.Transport == TransportUDP {
		return q.fail(StatusRefused, ReasonZoneTransfer, dns.RcodeRefused)
	}
	if q.Type == dns.TypeAXFR || q.Type == dns.TypeIXFR {
		// TCP and DoT hand transfers to ServeTransfer before the pipeline;
		// DoH, DoQ, DoH3 and the API cannot carry one.
		return q.fail(StatusRefused, ReasonZoneTransfer, dns.RcodeRefused)
	}
	if q.Class != dns.ClassINET {
		return q.fail(StatusRefused, ReasonClass, dns.RcodeRefused)
	}
	if e.HasOptions || q.Type == dns.TypeANY || h.AN != 0 || h.NS != 0 || s.cfg.DisableFastPath {
		return s.ingressSlow(q)
	}
	return stageNext
}

// ingressSlow unpacks the whole request with miekg/dns for what the fast
// parser leaves alone (options, compressed questions, ANY, ...).
func (s *Server) ingressSlow(q *Query) stageResult {
	req := new(dns.Msg)
	if err := req.Unpack(q.in); err != nil || len(req.Question) != 1 {
		q.qend = wire.HeaderLen
		q.Name, q.Lower = nil, nil
		return q.fail(StatusMalformed, ReasonFormErr, dns.RcodeFormatError)
	}
	q.slow, q.req = true, req
	if q.Name == nil {
		// Compressed question: rebuild the name so answers echo it uncompressed.
		name, err := packName(req.Question[0].Name)
		if err != nil {
			return q.fail(StatusMalformed, ReasonFormErr, dns.RcodeFormatError)
		}
		q.Name = name
		n := copy(q.lowerBuf[:], name)
		q.Lower = q.lowerBuf[:n]
		lowerASCII(q.Lower)
		q.Type, q.Class = req.Question[0].Qtype, req.Question[0].Qclass
		q.qend = -1 // the request's question bytes cannot be echoed as-is
		// The fast parser stopped at the question: EDNS (and padding) come
		// from the full parse.
		if opt := req.IsEdns0(); opt != nil {
			q.EDNS = wire.EDNS{Present: true, UDPSize: opt.UDPSize(), Version: opt.Version(), DO: opt.Do(), HasOptions: len(opt.Option) > 0}
			keepaliveData := false
			for _, o := range opt.Option {
				q.padding = q.padding || o.Option() == dns.EDNS0PADDING
				if k, ok := o.(*dns.EDNS0_TCP_KEEPALIVE); ok {
					q.keepalive = q.keepalive || k.Timeout == 0
					keepaliveData = keepaliveData || k.Timeout != 0
				}
			}
			if keepaliveData && q.Transport.Stream() {
				return q.fail(StatusMalformed, ReasonFormErr, dns.RcodeFormatError)
			}
			ecs, _, err := wire.FindECS(q.in)
			if err != nil {
				return q.fail(StatusMalformed, ReasonFormErr, dns.RcodeFormatError)
			}
			q.EDNS.ECS = ecs
		}
		if q.EDNS.Present && q.EDNS.Version > 0 {
			q.EDNS.DO, q.EDNS.ECS = false, wire.ECS{}
			return q.fail(StatusMalformed, ReasonBadVers, dns.RcodeBadVers)
		}
		if q.Class != dns.ClassINET {
			return q.fail(StatusRefused, ReasonClass, dns.RcodeRefused)
		}
	}
	return stageNext
}

func (q *Query) setQuestion(qq wire.Question) {
	q.Name, q.Lower, q.Type, q.Class, q.qend = qq.Name, qq.Lower, qq.Type, qq.Class, qq.End
}

// fail answers with an rcode and no records.
func (q *Query) fail(st Status, r Reason, rcode int) stageResult {
	q.Status, q.Reason, q.Rcode = st, r, rcode
	q.fast, q.resp = fastEmpty, nil
	return stageDone
}

// identify names the client and its groups. A trusted forwarder's ECS
// option names the client first (the UDP read loop has done it already,
// before rate limiting).
func stageIdentify(s *Server, q *Query) stageResult {
	if len(s.cfg.ECSClientFrom) > 0 {
		s.applyECS(q)
	}
	if id := q.snap.in.Identifier; id != nil {
		q.ClientInfo = id.Identify(q.Client.Addr(), q.ClientID)
	}
	return stageNext
}

// healthName is the internal health-check name (spec Limits).
var healthName = []byte("\x06health\x07service\x08internal\x00")

// control answers the health name and applies node toggles.
func stageControl(s *Server, q *Query) stageResult {
	q.blockingOff = s.blockingOff.Load()
	if string(q.Lower) != string(healthName) {
		return stageNext
	}
	q.Reason = ReasonHealth
	if s.lameduck.Load() {
		return q.fail(StatusControl, ReasonLameduck, dns.RcodeServerFailure)
	}
	q.Status, q.Rcode = StatusControl, dns.RcodeSuccess
	m := q.newResponse(dns.RcodeSuccess, true)
	if q.Type == dns.TypeTXT {
		m.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: m.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{"ok"}}}
	}
	q.resp = m
	return stageDone
}

// local answers rewrites and local host entries.
func stageLocal(s *Server, q *Query) stageResult {
	l := q.snap.in.Local
	if l == nil {
		return stageNext
	}
	a, ok := l.Resolve(q.Lower, q.Type, q.ClientInfo)
	if !ok {
		return stageNext
	}
	q.Status, q.Reason, q.Rcode, q.Rule, q.Policy = StatusLocal, ReasonRewrite, a.Rcode, a.Rule, a.Policy
	m := q.newResponse(a.Rcode, true)
	m.Answer = a.Answer
	q.resp = m
	return stageDone
}

// authoritative answers from our zones; exact answers use pre-encoded bytes.
func stageAuthoritative(s *Server, q *Query) stageResult {
	t := q.snap.in.Authority
	if t == nil {
		return stageNext
	}
	var r authority.Answer
	t.LookupWire(q.Lower, q.Type, authority.Client{Addr: q.Client.Addr(), InGroup: q.inGroupFn}, &r)
	switch r.Kind {
	case authority.NotFound:
		return stageNext
	case authority.Forward:
		q.forwardGroup = r.ForwardGroup
		return stageNext
	}
	q.Status, q.Reason, q.Rcode, q.aa = StatusAuthoritative, ReasonZone, r.Rcode, r.Authoritative
	q.Zone = r.Zone // the table's string: no copy per query
	switch r.Kind {
	case authority.Referral:
		q.Reason = ReasonReferral
	case authority.Refused:
		q.Status = StatusRefused
		q.fast = fastEmpty
		return stageDone
	case authority.ServFail:
		q.Status = StatusFailed
		q.fast = fastEmpty
		return stageDone
	}
	if r.Wire != nil && !q.slow {
		q.fast, q.authWire, q.counts = fastAuth, r.Wire, r.Counts
		return stageDone
	}
	r.Fill()
	m := q.newResponse(r.Rcode, r.Authoritative)
	m.Answer, m.Ns, m.Extra = r.Answer, r.Ns, r.Extra
	q.resp = m
	return stageDone
}

// blocking applies block and allow lists, policies and rewrites.
func stageBlocking(s *Server, q *Query) stageResult {
	b := q.snap.in.Blocker
	if b == nil || q.blockingOff || !q.snap.in.BlockingEnabled {
		return stageNext
	}
	d := &q.decision
	b.DecideInto(q.Lower, q.Type, q.ClientInfo, d)
	q.List, q.Rule, q.RulePre, q.RulePost, q.Policy, q.NoLog = d.List, d.Rule, d.RulePre, d.RulePost, d.Policy, d.NoLog
	q.ruleIsName = d.RuleIsName
	if d.UpstreamGroup != "" && q.forwardGroup == "" {
		q.forwardGroup = d.UpstreamGroup
	}
	switch d.Verdict {
	case VerdictAllow:
		q.Reason = ReasonAllowed
		return stageNext
	case VerdictRewrite:
		q.Status, q.Reason, q.Rcode = StatusRewritten, ReasonRewrite, dns.RcodeSuccess
		if target := chaseTarget(d, q.Type); target != "" && q.snap.in.Forwarder != nil {
			if lower, err := packName(target); err == nil {
				// The cache and upstream stages resolve the target for us.
				lowerASCII(lower)
				q.chase, q.chaseLower = d.Answer, lower
				return stageNext
			}
		}
		m := q.newResponse(dns.RcodeSuccess, false)
		m.Answer = d.Answer
		q.resp = m
		return stageDone
	case VerdictBlock:
		q.Status, q.Reason = StatusBlocked, ReasonBlockList
		if !q.slow {
			q.fastBlock(d)
			return stageDone
		}
		q.resp = q.blockResponse(d)
		q.Rcode = q.resp.Rcode
		if q.EDNS.Present {
			code := d.EDECode
			if code == 0 {
				code = dns.ExtendedErrorCodeBlocked
			}
			q.ede = &dns.EDNS0_EDE{InfoCode: code, ExtraText: d.withRuleText(q.Lower).ExtraText()}
		}
		return stageDone
	}
	return stageNext
}

// chaseTarget returns the target of the CNAME ending a rewrite answer when
// the decision asks for it to be resolved and the query type needs it.
func chaseTarget(d *Decision, qtype uint16) string {
	if !d.ChaseCNAME || len(d.Answer) == 0 || qtype == dns.TypeCNAME || qtype == dns.TypeANY {
		return ""
	}
	if c, ok := d.Answer[len(d.Answer)-1].(*dns.CNAME); ok {
		return c.Target
	}
	return ""
}

// fwdLower is the lower-case wire name the cache and upstream stages work
// on: the question, or the CNAME target being chased.
func (q *Query) fwdLower() []byte {
	if q.chaseLower != nil {
		return q.chaseLower
	}
	return q.Lower
}

// chaseAnswer answers a chased CNAME with the target's answer m: the
// rewrite's records, then the target's sections, with the target's rcode.
func (q *Query) chaseAnswer(m *dns.Msg) stageResult {
	if m.Rcode == dns.RcodeServerFailure {
		return q.fail(StatusFailed, ReasonUpstreamError, dns.RcodeServerFailure)
	}
	resp := q.newResponse(m.Rcode, false)
	resp.Answer = append(append(make([]dns.RR, 0, len(q.chase)+len(m.Answer)), q.chase...), m.Answer...)
	resp.Ns = m.Ns
	for _, rr := range m.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			resp.Extra = append(resp.Extra, rr)
		}
	}
	q.Rcode, q.resp, q.fast = m.Rcode, resp, fastNone
	return stageDone
}

func (q *Query) blockResponse(d *Decision) *dns.Msg {
	ttl := q.blockTTL(d.TTL)
	switch d.Mode {
	case BlockNXDomain:
		return q.newResponse(dns.RcodeNameError, false)
	case BlockRefused:
		return q.newResponse(dns.RcodeRefused, false)
	}
	v4, v6 := netipZero4, netipZero6
	if d.Mode == BlockCustomIP || d.Mode == BlockPage {
		v4, v6 = d.IPv4, d.IPv6
	}
	m := q.newResponse(dns.RcodeSuccess, false)
	hdr := dns.RR_Header{Name: m.Question[0].Name, Class: dns.ClassINET, Ttl: uint32(ttl / time.Second)}
	switch {
	case q.Type == dns.TypeA && v4.Is4():
		hdr.Rrtype = dns.TypeA
		m.Answer = []dns.RR{&dns.A{Hdr: hdr, A: v4.AsSlice()}}
	case q.Type == dns.TypeAAAA && v6.Is6():
		hdr.Rrtype = dns.TypeAAAA
		m.Answer = []dns.RR{&dns.AAAA{Hdr: hdr, AAAA: v6.AsSlice()}}
	}
	return m
}

func (q *Query) blockTTL(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return q.snap.in.BlockTTL
	}
	return ttl
}

// fastBlock makes the block answer of d for encodeFast: the bytes
// blockResponse and encodeSlow make (FuzzFastSlowParity, the block golden
// cases), without a dns.Msg, its presentation name or miekg/dns packing,
// which made a blocked answer dearer than a cached one (issue #27 item 2).
func (q *Query) fastBlock(d *Decision) {
	q.fast, q.counts = fastAuth, [3]uint16{}
	q.authWire = q.blockRR[:0]
	switch d.Mode {
	case BlockNXDomain:
		q.Rcode = dns.RcodeNameError
	case BlockRefused:
		q.Rcode = dns.RcodeRefused
	default:
		q.Rcode = dns.RcodeSuccess
		v4, v6 := netipZero4, netipZero6
		if d.Mode == BlockCustomIP || d.Mode == BlockPage {
			v4, v6 = d.IPv4, d.IPv6
		}
		var ip []byte
		switch {
		case q.Type == dns.TypeA && v4.Is4():
			a := v4.As4()
			ip = a[:]
		case q.Type == dns.TypeAAAA && v6.Is6():
			a := v6.As16()
			ip = a[:]
		}
		if ip != nil {
			// The owner is a pointer to the question, as miekg/dns
			// compresses it.
			b := append(q.blockRR[:0], 0xC0, wire.HeaderLen)
			b = binary.BigEndian.AppendUint16(b, q.Type)
			b = binary.BigEndian.AppendUint16(b, dns.ClassINET)
			b = binary.BigEndian.AppendUint32(b, uint32(q.blockTTL(d.TTL)/time.Second))
			b = binary.BigEndian.AppendUint16(b, uint16(len(ip)))
			q.authWire = append(b, ip...)
			q.counts[0] = 1
		}
	}
	if q.EDNS.Present {
		q.fastEDE, q.edeCode, q.edeText = true, d.EDECode, d.EDEText
		q.edeRule = d.EDERule && (d.Rule != "" || d.RuleIsName)
		if q.edeCode == 0 {
			q.edeCode = dns.ExtendedErrorCodeBlocked
		}
	}
}

// cache answers from earlier upstream answers.
func stageCache(s *Server, q *Query) stageResult {
	c := q.cache
	if c == nil {
		return stageNext
	}
	q.cacheNow = c.NowOr(q.Start)
	e, st := c.Get(q.fwdLower(), q.Type, q.Class, q.cacheFlags(), q.cacheNow)
	switch st {
	case cache.Fresh:
		if q.logLater {
			q.freshHit = true
		} else {
			s.metrics.cacheHits.Inc()
		}
		if q.chase != nil {
			if e.Rcode() == dns.RcodeServerFailure {
				return q.fail(StatusFailed, ReasonCacheServfail, dns.RcodeServerFailure)
			}
			return q.chaseAnswer(q.entryMsgFor(q.chaseLower, e))
		}
		q.Status, q.Rcode = StatusCached, e.Rcode()
		if e.Rcode() == dns.RcodeServerFailure {
			q.Status, q.Reason = StatusFailed, ReasonCacheServfail
		}
		q.useEntry(e)
		return stageDone
	case cache.Stale:
		q.stale = e
	}
	s.metrics.cacheMisses.Inc()
	return stageNext
}

func (q *Query) cacheFlags() cache.Flags {
	var f cache.Flags
	if q.EDNS.DO {
		f |= cache.FlagDO
	}
	if q.Flags&wire.FlagCD != 0 {
		f |= cache.FlagCD
	}
	return f
}

func (q *Query) useEntry(e *cache.Entry) {
	q.entry, q.ad = e, e.AD() && (q.EDNS.DO || q.Flags&wire.FlagAD != 0)
	q.fast = fastCache
	if q.slow || q.caseLoose(e) {
		q.resp = q.entryMsg(e)
	}
}

// caseLoose: e's sections are the upstream's bytes, which give a name the
// question's case in other places than the packed records would, and the
// question is not in lower case (where the two read the same): the
// answer is unpacked and packed again (cache.Entry.CaseLoose).
func (q *Query) caseLoose(e *cache.Entry) bool {
	return e.CaseLoose() && !bytes.Equal(q.Name, q.Lower)
}

// upstream forwards to an upstream group, serving stale answers when the
// upstream fails or is slower than maxWait (RFC 8767).
func stageUpstream(s *Server, q *Query) stageResult {
	if q.detachable {
		// Whoever finishes the query logs it: the read loop that defers
		// its log stage (logLater) no longer owns it.
		q.logLater = false
		if s.startAsync(q) {
			return stageAwait
		}
		return stageDetach
	}
	if q.async.raw != nil || q.async.handoff != nil {
		return s.asyncAnswer(q)
	}
	fwd := q.snap.in.Forwarder
	if fwd == nil {
		return q.fail(StatusRefused, ReasonNoUpstream, dns.RcodeRefused)
	}
	lower := q.fwdLower()
	var nb [4 * wire.MaxNameLen]byte // escapes are at most 4 bytes per byte
	name := string(wire.AppendPresentation(nb[:0], lower))
	group := q.forwardGroup
	if r := q.snap.in.Router; r != nil {
		if g, cond := r.Route(name); cond {
			q.conditional = true
			if group == "" {
				group = g
			}
		}
	}
	q.UpstreamGroup = group
	// The request is pooled when the forwarder is a RawForwarder, which
	// keeps nothing of it once it returns (another Forwarder might), and
	// only for a forward waited for here (below).
	var rm *reqMsg
	rf, _ := fwd.(RawForwarder)
	if rf != nil && q.stale == nil {
		rm = reqMsgs.Get().(*reqMsg)
		defer rm.putRaw()
	}
	req := q.upstreamRequest(name, rm)
	var res upstreamResult
	var raw []byte // the answer's bytes as received, for the cache
	if q.stale == nil {
		// No timer of its own: the upstream package times the deadline
		// on its pooled UDP sockets (upstream.DeadlineContext).
		ctx := upstream.NewDeadline(s.ctx, time.Now().Add(s.cfg.UpstreamTimeout))
		if rf != nil {
			// The answer's bytes too: the cache keeps them as they are
			// when it can instead of packing the records again.
			res.resp, raw, res.upstream, res.err = rf.ForwardRaw(ctx, group, req, q.Client.Addr(), rm.raw)
			if raw != nil {
				rm.raw = raw[:0] // grown: keep it
			}
		} else {
			res.resp, res.upstream, res.err = fwd.Forward(ctx, group, req, q.Client.Addr())
		}
		ctx.Release()
		// A nil message with bytes: a light answer (see below).
		s.upHealth.result(group, res.err == nil && (res.resp != nil || raw != nil), false, time.Now())
	} else {
		// A group that failed just now: answer stale at once (RFC 8767),
		// and only the probe asks the upstream, in the background.
		down, probe := s.upHealth.check(group, time.Now())
		if down && !probe {
			return s.answerStale(q)
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.UpstreamTimeout)
		ch := make(chan upstreamResult, 1)
		c, flags, lower, qtype, qclass, cond := q.cache, q.cacheFlags(), append([]byte(nil), lower...), q.Type, q.Class, q.conditional
		client := q.Client.Addr()
		health := &s.upHealth
		go func() {
			defer cancel()
			r, up, err := fwd.Forward(ctx, group, req, client)
			health.result(group, err == nil && r != nil, probe, time.Now())
			if err == nil && !cond && r != nil && !r.Truncated {
				// A late answer still refreshes the cache for the next client.
				_ = c.Put(lower, qtype, qclass, flags, r, c.Now())
			}
			ch <- upstreamResult{r, up, err}
		}()
		if down {
			return s.answerStale(q) // the probe refreshes in the background
		}
		t := time.NewTimer(q.cache.Config().StaleMaxWait)
		select {
		case res = <-ch:
			t.Stop()
		case <-t.C:
			// The client response timer: the group failed this client.
			s.upHealth.result(group, false, false, time.Now())
			res.err = context.DeadlineExceeded
		}
		if res.err != nil || res.resp == nil || res.resp.Rcode == dns.RcodeServerFailure {
			return s.answerStale(q)
		}
	}
	return s.upstreamAnswer(q, lower, name, res.resp, raw, res.upstream, res.err)
}

// upstreamResult is what a forward returned.
type upstreamResult struct {
	resp     *dns.Msg
	upstream string
	err      error
}

// upstreamAnswer finishes q with what its upstream said: resp, or a light
// answer's bytes (raw with resp nil), from upstream; or err.
//
// name is lower's presentation form ("": made when needed).
func (s *Server) upstreamAnswer(q *Query, lower []byte, name string, resp *dns.Msg, raw []byte, up string, err error) stageResult {
	res := upstreamResult{resp, up, err}
	var e *cache.Entry
	stored := false // the answer went to the cache (or was found not cacheable)
	if res.err == nil && res.resp == nil && raw != nil {
		// A light answer (upstream.Resolver.ForwardRaw): a NOERROR or
		// NXDOMAIN left unparsed. The cache keeps its bytes as they are
		// and the client's answer is written from them; it is unpacked
		// only when the cache cannot keep it or the answer needs records.
		// The upstream checked the bytes (wire.ScanAnswer): no extended
		// RCODE, so the header's is the answer's.
		rcode := int(raw[3] & 0xF)
		if !q.conditional {
			var err error
			e, err = q.cache.StoreRaw(lower, q.Type, q.Class, q.cacheFlags(), raw, q.cache.Now())
			stored = !errors.Is(err, cache.ErrNotRaw)
		}
		if q.chase == nil && q.answersFrom(e, rcode) {
			q.Upstream = res.upstream
			q.Status, q.Rcode = StatusAnswered, rcode
			return q.answerFrom(e)
		}
		r := new(dns.Msg)
		if err := r.Unpack(raw); err != nil { // ScanAnswer rules this out
			res.err = fmt.Errorf("unpack upstream answer: %w", err)
		} else {
			res.resp = r
		}
	}
	if res.err != nil || res.resp == nil {
		q.Reason = ReasonUpstreamError
		if errors.Is(res.err, context.DeadlineExceeded) {
			q.Reason = ReasonUpstreamTimeout
		}
		q.Status, q.Rcode = StatusFailed, dns.RcodeServerFailure
		if !q.conditional && q.stale == nil {
			_ = q.cache.Put(lower, q.Type, q.Class, q.cacheFlags(), &dns.Msg{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeServerFailure}}, q.cache.Now())
		}
		q.fast = fastEmpty
		return stageDone
	}
	q.Upstream = res.upstream
	r := res.resp
	if !stored && !q.conditional && !r.Truncated && q.stale == nil {
		e, _ = q.cache.StoreWire(lower, q.Type, q.Class, q.cacheFlags(), r, raw, q.cache.Now())
	}
	if q.chase != nil {
		return q.chaseAnswer(r)
	}
	q.Status, q.Rcode = StatusAnswered, r.Rcode
	if r.Rcode == dns.RcodeServerFailure {
		q.Status = StatusFailed
	}
	if q.answersFrom(e, r.Rcode) {
		return q.answerFrom(e)
	}
	if name == "" {
		var nb [4 * wire.MaxNameLen]byte
		name = string(wire.AppendPresentation(nb[:0], lower))
	}
	m := q.newResponseName(r.Rcode, false, name) // name: q.Lower's form, no chase here
	// The header is written from q's flags (Server.flags): AD as a cache
	// hit on this answer would set it.
	q.ad = r.AuthenticatedData && (q.EDNS.DO || q.Flags&wire.FlagAD != 0)
	m.AuthenticatedData = q.ad
	m.Answer, m.Ns = r.Answer, r.Ns
	for _, rr := range r.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			m.Extra = append(m.Extra, rr)
		}
	}
	q.resp = m
	return stageDone
}

// answersFrom reports whether the answer to a miss (rcode from the
// upstream) can be written from the entry the cache made of it just now.
func (q *Query) answersFrom(e *cache.Entry, rcode int) bool {
	return e != nil && !q.slow && q.ede == nil && !q.fastEDE && (rcode == dns.RcodeSuccess || rcode == dns.RcodeNameError) &&
		e.Rcode() == rcode && !q.caseLoose(e)
}

// answerFrom answers a miss from e (answersFrom). The cache stored the
// answer's sections just now, with the upstream's TTLs: encodeFast copies
// them, as it does pre-encoded authoritative sections, instead of packing
// the same records again. The bytes are those encodeSlow would write (the
// same records, packed the same way after the same question) and the
// header is set by the same flags, AD as a cache hit sets it.
func (q *Query) answerFrom(e *cache.Entry) stageResult {
	q.fast, q.authWire = fastAuth, e.Sections()
	q.counts[0], q.counts[1], q.counts[2] = e.Counts()
	q.ad = e.AD() && (q.EDNS.DO || q.Flags&wire.FlagAD != 0)
	return stageDone
}

// answerStale answers q with its stale cache entry.
func (s *Server) answerStale(q *Query) stageResult {
	s.metrics.cacheStale.Inc()
	if q.chase != nil {
		return q.chaseAnswer(q.entryMsgFor(q.chaseLower, q.stale))
	}
	q.Status, q.Rcode = StatusStale, q.stale.Rcode()
	q.useEntry(q.stale)
	q.entry = q.stale
	return stageDone
}

// The node's forwarder takes the raw path (a change of its signature must
// not silently send every miss through Forward and a second pack).
var _ RawForwarder = (*upstream.Resolver)(nil)

// reqMsg is a pooled upstream request: the message, its question and
// its OPT record, and a buffer for the answer's bytes.
type reqMsg struct {
	m     dns.Msg
	q     [1]dns.Question
	opt   dns.OPT
	extra [1]dns.RR
	raw   []byte
}

var reqMsgs = sync.Pool{New: func() any { return &reqMsg{raw: make([]byte, 0, 512)} }}

// maxRawKeep bounds the answer buffer a pooled reqMsg keeps.
const maxRawKeep = 4 << 10

// putRaw pools rm without references to the query's data.
func (rm *reqMsg) putRaw() {
	raw := rm.raw
	if cap(raw) > maxRawKeep {
		raw = nil
	}
	*rm = reqMsg{raw: raw[:0]}
	reqMsgs.Put(rm)
}

// upstreamRequest builds the request to forward, in rm when not nil.
func (q *Query) upstreamRequest(name string, rm *reqMsg) *dns.Msg {
	var req *dns.Msg
	if q.req != nil || rm == nil {
		req = new(dns.Msg)
	}
	if q.req != nil {
		// Keep the client's EDNS options (ECS, ...) for the forwarder to
		// judge, but not its cookie, padding or keepalive: they are per
		// hop (the fast path never forwards them either).
		req = q.req.Copy()
		if opt := req.IsEdns0(); opt != nil {
			opt.Option = slices.DeleteFunc(opt.Option, func(o dns.EDNS0) bool {
				return o.Option() == dns.EDNS0COOKIE || o.Option() == dns.EDNS0PADDING || o.Option() == dns.EDNS0TCPKEEPALIVE
			})
		}
	} else if rm != nil {
		// As below, in rm.
		req = &rm.m
		rm.q[0] = dns.Question{Name: name, Qtype: q.Type, Qclass: q.Class}
		req.Question = rm.q[:]
		if q.EDNS.Present {
			rm.opt.Hdr.Name, rm.opt.Hdr.Rrtype = ".", dns.TypeOPT
			rm.opt.SetUDPSize(q.EDNS.UDPSize)
			if q.EDNS.DO {
				rm.opt.SetDo()
			}
			rm.extra[0] = &rm.opt
			req.Extra = rm.extra[:]
			if e := q.EDNS.ECS; e.Present {
				rm.opt.Option = append(rm.opt.Option, &dns.EDNS0_LOCAL{Code: wire.OptionECS, Data: e.AppendData(nil, 0)})
			}
		}
	} else {
		req.Question = []dns.Question{{Name: name, Qtype: q.Type, Qclass: q.Class}}
		if q.EDNS.Present {
			req.SetEdns0(q.EDNS.UDPSize, q.EDNS.DO)
			if e := q.EDNS.ECS; e.Present {
				// As the slow path keeps it: the forwarder applies
				// upstreams.ecs.mode (strip, forward or add). The
				// option's bytes as the client sent them.
				opt := req.Extra[0].(*dns.OPT)
				opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: wire.OptionECS, Data: e.AppendData(nil, 0)})
			}
		}
	}
	// The upstream pool draws IDs the same way when one is taken; the
	// runtime generator is seeded from the OS and cheap (dns.Id reads
	// crypto/rand and allocates).
	req.Id = uint16(rand.Uint32())
	req.Question[0].Name = name
	req.RecursionDesired = true
	req.CheckingDisabled = q.Flags&wire.FlagCD != 0
	req.AuthenticatedData = q.Flags&wire.FlagAD != 0
	return req
}

// log records metrics and hands a copy to the query logger; it always runs.
func stageLog(s *Server, q *Query) stageResult {
	if q.logLater {
		// The UDP batch loop logs the query once the whole batch is
		// answered (logAnswered), with the batch's one clock read.
		q.logPending = true
		return stageNext
	}
	q.Duration = time.Since(q.Start)
	s.logDone(q)
	return stageNext
}

// logAnswered is the log stage of a query whose stage deferred it, once
// its batch was answered at now: a batch of queries reads the clock once
// instead of once each, and counts its queries for the metrics in sb.
func (s *Server) logAnswered(q *Query, now time.Time, sb *statsBatch) {
	q.logPending = false
	q.Duration = now.Sub(q.Start)
	sb.add(q)
	s.logRecord(q)
}

// logDone counts a finished query and hands its record to the query log.
func (s *Server) logDone(q *Query) {
	s.metrics.observe(q)
	s.logRecord(q)
}

// logRecord hands q's record to the query log.
func (s *Server) logRecord(q *Query) {
	if q.NoLog || !s.logging() {
		return
	}
	if il := s.inPlace; il != nil {
		il.LogFrom(q)
		return
	}
	var rec QueryRecord
	q.FillRecord(&rec)
	s.logger.Log(rec)
}
