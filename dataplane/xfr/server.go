package xfr

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/authority"
)

// DefaultMessageSize is the most record bytes (uncompressed) packed into
// one transfer message; compressed, a message stays well under 64 KiB.
const DefaultMessageSize = 32 << 10

// fudge is the TSIG time window of the answers (RFC 8945 10: 300s).
const fudge = 300

// Config configures a Server.
type Config struct {
	Keys    Keyring
	Journal *Journal // nil: a journal with the default bounds
	// MessageSize bounds the record bytes of one message (default
	// DefaultMessageSize); tests make it small to get many messages.
	MessageSize int
	Logger      *slog.Logger
	Metrics     *Metrics // nil: not counted
	// Now is the clock TSIG checks against (tests); nil is time.Now.
	Now func() time.Time
}

// Server answers AXFR and IXFR for the primary zones of the table it is
// handed with each request. It implements dataplane.Transfers.
type Server struct {
	keys    atomic.Pointer[Keyring]
	journal *Journal
	msgSize int
	log     *slog.Logger
	metrics *Metrics
	now     func() time.Time
}

// New returns a Server.
func New(cfg Config) *Server {
	s := &Server{journal: cfg.Journal, msgSize: cfg.MessageSize, log: cfg.Logger, metrics: cfg.Metrics, now: cfg.Now}
	if s.journal == nil {
		s.journal = NewJournal(0, 0)
	}
	if s.msgSize <= 0 {
		s.msgSize = DefaultMessageSize
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	kr := cfg.Keys
	if kr == nil {
		kr = Keyring{}
	}
	s.keys.Store(&kr)
	return s
}

// SetKeys replaces the keys (tsigKeys changed).
func (s *Server) SetKeys(kr Keyring) {
	if kr == nil {
		kr = Keyring{}
	}
	s.keys.Store(&kr)
}

// Keys returns the current keys.
func (s *Server) Keys() Keyring { return *s.keys.Load() }

// Journal is the server's IXFR journal.
func (s *Server) Journal() *Journal { return s.journal }

// Observe records a newly served table in the journal; see Journal.Observe.
func (s *Server) Observe(t *authority.Table) []Served { return s.journal.Observe(t) }

// transfer is the state of one answered request.
type transfer struct {
	s      *Server
	req    *dns.Msg
	raw    []byte
	write  func([]byte) error
	client string
	res    dataplane.TransferResult

	key     *Key
	mac     string // the MAC the next message's signature chains from
	signed  int    // messages signed so far
	timeReq uint64 // the request's time signed
}

// Transfer answers one AXFR or IXFR query (dataplane.Transfers).
func (s *Server) Transfer(ctx context.Context, r dataplane.TransferRequest) dataplane.TransferResult {
	start := time.Now()
	t := &transfer{s: s, raw: r.Msg, write: r.Write, client: r.Client.String()}
	t.serve(ctx, r)
	typ := "axfr"
	if t.req != nil && len(t.req.Question) == 1 && t.req.Question[0].Qtype == dns.TypeIXFR {
		typ = "ixfr"
	}
	s.metrics.observe(t.res, typ, time.Since(start))
	lvl := slog.LevelInfo
	if t.res.Refused || t.res.Rcode != dns.RcodeSuccess {
		lvl = slog.LevelWarn
	}
	s.log.Log(ctx, lvl, "zone transfer", "client", r.Client.String(), "transport", r.Transport.String(), "type", typ,
		"zone", t.res.Zone, "result", t.res.Mode, "rcode", dns.RcodeToString[t.res.Rcode], "serial", t.res.Serial,
		"key", t.res.Key, "messages", t.res.Messages, "bytes", t.res.Bytes, "took", time.Since(start))
	return t.res
}

func (t *transfer) serve(ctx context.Context, r dataplane.TransferRequest) {
	req := new(dns.Msg)
	if err := req.Unpack(r.Msg); err != nil || len(req.Question) != 1 {
		t.res.Mode = "formerr"
		t.fail(dns.RcodeFormatError)
		return
	}
	t.req = req
	q := req.Question[0]
	if q.Qclass != dns.ClassINET {
		t.refuse("refused", dns.RcodeRefused)
		return
	}
	if !t.verify() {
		return
	}
	if r.Transport != dataplane.TransportTCP && r.Transport != dataplane.TransportDoT {
		t.refuse("refused", dns.RcodeRefused) // RFC 5936 4.2: not over UDP
		return
	}
	var tz authority.TransferZone
	ok := false
	if r.Table != nil {
		tz, ok = r.Table.TransferZone(lowerWire(q.Name))
	}
	if !ok {
		// RFC 5936 2.2.1: not authoritative for the zone named.
		t.refuse("notauth", dns.RcodeNotAuth)
		return
	}
	t.res.Zone = tz.Name()
	switch {
	case len(tz.Keys()) == 0:
		t.refuse("refused", dns.RcodeRefused) // transfers need a key: spec.policy.transferTSIGKeyRefs
		return
	case t.key == nil:
		t.refuse("refused", dns.RcodeRefused) // unsigned request for a zone that needs a key
		return
	case !slices.ContainsFunc(tz.Keys(), func(k string) bool { return dns.CanonicalName(k) == t.key.Name }):
		t.refuse("refused", dns.RcodeRefused) // a valid key this zone does not name
		return
	case !tz.Synced():
		t.res.Mode = "servfail"
		t.fail(dns.RcodeServerFailure)
		return
	}
	soa := tz.SOA()
	t.res.Serial = soa.Serial
	if q.Qtype == dns.TypeIXFR {
		t.ixfr(ctx, tz, soa)
		return
	}
	t.res.Mode = "axfr"
	t.axfr(ctx, tz, soa)
}

// verify checks the request's TSIG (RFC 8945 5.2) and answers a failure
// itself; true means go on (t.key is set when the request was signed).
func (t *transfer) verify() bool {
	ts := t.req.IsTsig()
	if ts == nil {
		return true
	}
	if !wellFormed(ts) {
		t.res.Mode = "formerr"
		t.fail(dns.RcodeFormatError)
		return false
	}
	name := dns.CanonicalName(ts.Hdr.Name)
	t.res.Key = name
	k, ok := t.s.Keys()[name]
	if !ok || !dns.IsFqdn(ts.Algorithm) || dns.CanonicalName(ts.Algorithm) != k.Algorithm {
		t.tsigError("badkey", dns.RcodeBadKey, ts)
		return false
	}
	// RFC 8945 5.2: the MAC is checked before the time (BADSIG first).
	err := dns.TsigVerify(t.raw, k.Secret, "", false)
	switch {
	case errors.Is(err, dns.ErrTime):
		t.key = &k
		t.tsigError("badtime", dns.RcodeBadTime, ts)
		return false
	case err != nil:
		t.tsigError("badsig", dns.RcodeBadSig, ts)
		return false
	}
	t.key, t.mac, t.timeReq = &k, ts.MAC, ts.TimeSigned
	return true
}

// tsigError answers a TSIG failure as RFC 8945 5.2 says: NOTAUTH with the
// TSIG error; BADKEY and BADSIG answers carry an unsigned TSIG, BADTIME
// is signed and tells the server's time in Other Data.
func (t *transfer) tsigError(mode string, code int, ts *dns.TSIG) {
	t.res.Mode, t.res.Rcode, t.res.Refused = mode, dns.RcodeNotAuth, true
	t.s.log.Warn("zone transfer TSIG check failed", "client", t.client, "error", dns.RcodeToString[code], "key", dns.CanonicalName(ts.Hdr.Name),
		"algorithm", ts.Algorithm, "zone", t.req.Question[0].Name)
	b, err := tsigErrorAnswer(t.reply(dns.RcodeNotAuth), t.req.Id, code, ts, t.key, t.s.now())
	if err != nil {
		t.s.log.Error("zone transfer: TSIG error answer", "err", err)
		return
	}
	t.send(b)
}

// tsigErrorAnswer packs m (the NOTAUTH answer) with the TSIG that tells
// the error code.
func tsigErrorAnswer(m *dns.Msg, id uint16, code int, ts *dns.TSIG, key *Key, at time.Time) ([]byte, error) {
	now := uint64(at.Unix())
	rr := &dns.TSIG{Hdr: dns.RR_Header{Name: ts.Hdr.Name, Rrtype: dns.TypeTSIG, Class: dns.ClassANY}, Algorithm: ts.Algorithm,
		Fudge: ts.Fudge, OrigId: id, Error: uint16(code), TimeSigned: ts.TimeSigned}
	secret := ""
	if code == dns.RcodeBadTime && key != nil {
		var other [6]byte
		binary.BigEndian.PutUint16(other[0:], uint16(now>>32))
		binary.BigEndian.PutUint32(other[2:], uint32(now))
		rr.OtherLen, rr.OtherData = 6, hexString(other[:])
		secret = key.Secret
	}
	m.Extra = append(m.Extra, rr)
	// BADKEY and BADSIG answers go unsigned (dns.TsigGenerate leaves the
	// MAC out for them), BADTIME is signed.
	b, _, err := dns.TsigGenerate(m, secret, ts.MAC, false)
	return b, err
}

// SignAnswer signs the pipeline's answer to a TSIG-signed query
// (dataplane.AnswerSigner): the SOA query a secondary sends before it asks
// for a transfer is signed, and so must the answer be. A request whose
// signature fails gets the TSIG error answer instead.
func (s *Server) SignAnswer(req, resp []byte) []byte {
	m := new(dns.Msg)
	if err := m.Unpack(req); err != nil {
		return resp
	}
	ts := m.IsTsig()
	if ts == nil {
		return resp
	}
	if !wellFormed(ts) {
		r := new(dns.Msg)
		r.SetRcode(m, dns.RcodeFormatError)
		r.Extra = nil
		if b, err := r.Pack(); err == nil {
			return b
		}
		return resp
	}
	name := dns.CanonicalName(ts.Hdr.Name)
	k, ok, code := s.check(req, ts)
	if code != 0 {
		if m.Opcode != dns.OpcodeNotify { // the pipeline logged the NOTIFY's failure with its client
			s.log.Warn("signed query: TSIG check failed", "error", dns.RcodeToString[code], "key", name, "qname", qname(m))
		}
		r := new(dns.Msg)
		r.SetRcode(m, dns.RcodeNotAuth)
		r.Extra = nil
		var kp *Key
		if ok {
			kp = &k
		}
		b, err := tsigErrorAnswer(r, m.Id, code, ts, kp, s.now())
		if err != nil {
			return resp
		}
		return b
	}
	r := new(dns.Msg)
	if err := r.Unpack(resp); err != nil {
		return resp
	}
	r.Compress = true
	r.SetTsig(k.Name, k.Algorithm, fudge, s.now().Unix())
	b, _, err := dns.TsigGenerate(r, k.Secret, ts.MAC, false)
	if err != nil {
		s.log.Error("signed query: sign the answer", "err", err)
		return resp
	}
	return b
}

// check verifies the TSIG ts of the message req (RFC 8945 5.2: the key,
// then the MAC, then the time): the key when this node has it, and the
// TSIG error (BADKEY, BADSIG, BADTIME; 0 when it verifies).
func (s *Server) check(req []byte, ts *dns.TSIG) (Key, bool, int) {
	k, ok := s.Keys().Lookup(ts.Hdr.Name)
	if !ok || dns.CanonicalName(ts.Algorithm) != k.Algorithm {
		return k, ok, dns.RcodeBadKey
	}
	if err := dns.TsigVerify(req, k.Secret, "", false); errors.Is(err, dns.ErrTime) {
		return k, ok, dns.RcodeBadTime
	} else if err != nil {
		return k, ok, dns.RcodeBadSig
	}
	return k, ok, 0
}

// CheckTSIG verifies the TSIG of a message the pipeline answers itself, an
// incoming NOTIFY (dataplane.TSIGChecker): the key it names and the TSIG
// error, or FORMERR for a malformed TSIG; ("", 0) when it carries none.
// The answer itself is made by SignAnswer (signed, or the TSIG error).
func (s *Server) CheckTSIG(req []byte) (string, int) {
	m := new(dns.Msg)
	if err := m.Unpack(req); err != nil {
		return "", dns.RcodeFormatError
	}
	ts := m.IsTsig()
	if ts == nil {
		return "", 0
	}
	if !wellFormed(ts) {
		return "", dns.RcodeFormatError
	}
	// dns.TsigVerify rewrites the header it is given (ARCOUNT, ID), and the
	// pipeline still needs req to sign the answer: verify a copy.
	_, _, code := s.check(slices.Clone(req), ts)
	return dns.CanonicalName(ts.Hdr.Name), code
}

// wellFormed: a TSIG of class ANY naming an algorithm (RFC 8945 4.2);
// anything else is a FORMERR, answered without a TSIG.
func wellFormed(ts *dns.TSIG) bool {
	return ts.Hdr.Class == dns.ClassANY && ts.Algorithm != "" && ts.Algorithm != "." && dns.IsFqdn(ts.Algorithm)
}

func qname(m *dns.Msg) string {
	if len(m.Question) == 1 {
		return m.Question[0].Name
	}
	return ""
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// reply starts an answer to the request with the question echoed.
func (t *transfer) reply(rcode int) *dns.Msg {
	m := new(dns.Msg)
	m.Id, m.Response, m.Opcode, m.Rcode = t.req.Id, true, dns.OpcodeQuery, rcode
	m.Question = t.req.Question
	m.Compress = true
	return m
}

func (t *transfer) refuse(mode string, rcode int) {
	t.res.Mode, t.res.Refused = mode, true
	t.fail(rcode)
}

// fail answers with an rcode alone, signed when the request was.
func (t *transfer) fail(rcode int) {
	t.res.Rcode = rcode
	if t.req == nil {
		// not parsed: the header alone, with the ID when there is one
		var h [12]byte
		if len(t.raw) >= 3 {
			copy(h[:2], t.raw)
			h[2] = 0x80 | t.raw[2]&0x78 // QR, the opcode
			h[3] = byte(rcode)
			t.send(h[:])
		}
		return
	}
	t.emit(t.reply(rcode))
}

// emit signs m when the request was signed, packs and writes it.
func (t *transfer) emit(m *dns.Msg) bool {
	var b []byte
	var err error
	if t.key != nil {
		m.SetTsig(t.key.Name, t.key.Algorithm, fudge, t.s.now().Unix())
		// RFC 8945 5.3.1: the first message chains from the request's
		// MAC, each next one from the previous message's, timers only.
		b, t.mac, err = dns.TsigGenerate(m, t.key.Secret, t.mac, t.signed > 0)
		t.signed++
	} else {
		b, err = m.Pack()
	}
	if err != nil {
		t.s.log.Error("zone transfer: pack", "err", err, "zone", t.res.Zone)
		return false
	}
	return t.send(b)
}

func (t *transfer) send(b []byte) bool {
	if err := t.write(b); err != nil {
		t.res.Mode = "aborted"
		return false
	}
	t.res.Messages++
	t.res.Bytes += int64(len(b))
	return true
}

// stream sends records in messages of at most msgSize record bytes.
type stream struct {
	t     *transfer
	m     *dns.Msg
	size  int
	first bool
}

func (t *transfer) newStream() *stream {
	st := &stream{t: t, first: true}
	st.reset()
	return st
}

func (st *stream) reset() {
	st.m = st.t.reply(dns.RcodeSuccess)
	st.m.Authoritative = true
	if !st.first {
		st.m.Question = nil // RFC 5936 2.2.1: only the first message needs it
	}
	st.size = 0
}

func (st *stream) add(rr dns.RR) bool {
	l := dns.Len(rr)
	if st.size > 0 && st.size+l > st.t.s.msgSize {
		if !st.flush() {
			return false
		}
	}
	st.m.Answer = append(st.m.Answer, rr)
	st.size += l
	return true
}

func (st *stream) flush() bool {
	if len(st.m.Answer) == 0 {
		return true
	}
	ok := st.t.emit(st.m)
	st.first = false
	st.reset()
	return ok
}

// axfr sends SOA, every record, SOA (RFC 5936 2.2).
func (t *transfer) axfr(ctx context.Context, tz authority.TransferZone, soa *dns.SOA) {
	st := t.newStream()
	if !st.add(soa) {
		return
	}
	ok := true
	n := 0
	tz.Each(func(rr dns.RR) bool {
		n++
		if n&1023 == 0 && ctx.Err() != nil {
			ok = false
			t.res.Mode = "aborted"
			return false
		}
		ok = st.add(rr)
		return ok
	})
	if ok && st.add(soa) {
		st.flush()
	}
}

// ixfr answers from the journal (RFC 1995 4): one SOA when the client is
// up to date, the changes since its serial when the journal reaches back
// that far, else the whole zone.
func (t *transfer) ixfr(ctx context.Context, tz authority.TransferZone, soa *dns.SOA) {
	var have *dns.SOA
	for _, rr := range t.req.Ns {
		if s, ok := rr.(*dns.SOA); ok {
			have = s
		}
	}
	if have == nil {
		t.res.Mode = "formerr"
		t.fail(dns.RcodeFormatError) // RFC 1995 3: the client's SOA is required
		return
	}
	if !serialLess(have.Serial, soa.Serial) {
		t.res.Mode = "ixfr-uptodate"
		st := t.newStream()
		if st.add(soa) {
			st.flush()
		}
		return
	}
	changes, ok := t.s.journal.Since(tz, have.Serial)
	if !ok {
		t.res.Mode = "ixfr-axfr"
		t.axfr(ctx, tz, soa)
		return
	}
	t.res.Mode = "ixfr"
	st := t.newStream()
	if !st.add(soa) {
		return
	}
	for _, c := range changes {
		if !st.add(c.From) {
			return
		}
		for _, rr := range c.Deleted {
			if !st.add(rr) {
				return
			}
		}
		if !st.add(c.To) {
			return
		}
		for _, rr := range c.Added {
			if !st.add(rr) {
				return
			}
		}
	}
	if st.add(soa) {
		st.flush()
	}
}

// lowerWire packs a presentation name lower-cased, as the table keys zones.
func lowerWire(name string) []byte {
	b := make([]byte, 256)
	n, err := dns.PackDomainName(dns.CanonicalName(name), b, 0, nil, false)
	if err != nil {
		return nil
	}
	return b[:n]
}
