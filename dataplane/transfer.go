package dataplane

import (
	"context"
	"encoding/binary"
	"net/netip"
	"strconv"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/dataplane/wire"
)

// Transfers answers zone transfers (AXFR, IXFR) read from a TCP or DoT
// stream; dataplane/xfr implements it. A transfer is many messages, so it
// runs beside the pipeline, on the table of the snapshot current when it
// starts (one serial for the whole transfer).
type Transfers interface {
	Transfer(ctx context.Context, req TransferRequest) TransferResult
}

// AnswerSigner is implemented by a Transfers handler that also answers
// TSIG-signed queries signed (RFC 8945): secondaries sign the SOA queries
// they send before a transfer and refuse an unsigned answer.
type AnswerSigner interface {
	// SignAnswer returns resp signed with the key that signed req, the
	// TSIG error answer when req's signature does not verify, or resp as
	// it is when req carries no TSIG.
	SignAnswer(req, resp []byte) []byte
}

// TSIGChecker is implemented by a Transfers handler that can verify the
// TSIG of a message the pipeline answers itself (an incoming NOTIFY), so
// that a forged or stale one is refused before it is answered.
type TSIGChecker interface {
	// CheckTSIG returns the key req names and the TSIG error (BADKEY,
	// BADSIG, BADTIME; FORMERR for a malformed TSIG), ("", 0) when req
	// carries no TSIG.
	CheckTSIG(req []byte) (key string, code int)
}

// checkTSIG verifies req's TSIG when a checker is installed; without one
// nothing can be verified and (key "", 0) is returned.
func (s *Server) checkTSIG(req []byte) (string, int) {
	p := s.transfers.Load()
	if p == nil {
		return "", 0
	}
	if c, ok := (*p).(TSIGChecker); ok {
		return c.CheckTSIG(req)
	}
	return "", 0
}

// signAnswer signs the answer to a query that may carry a TSIG.
func (s *Server) signAnswer(req, resp []byte) []byte {
	p := s.transfers.Load()
	if p == nil {
		return resp
	}
	if sg, ok := (*p).(AnswerSigner); ok {
		return sg.SignAnswer(req, resp)
	}
	return resp
}

// TransferRequest is one AXFR or IXFR query on a stream.
type TransferRequest struct {
	Msg       []byte // the query as read, without the length prefix
	Client    netip.AddrPort
	Transport Transport
	Table     *authority.Table // nil when no zones are loaded
	// Write sends one message (without the length prefix); an error ends
	// the transfer.
	Write func(msg []byte) error
}

// TransferResult is what the query log and metrics record of a transfer.
type TransferResult struct {
	Zone     string // apex answered, "" when the name is no zone of ours
	Rcode    int
	Refused  bool   // refused for policy (no key, wrong key, not allowed)
	Serial   uint32 // serial sent
	Bytes    int64  // bytes written
	Messages int
	Key      string // TSIG key that signed the request, "" for none
	// Mode is how it was answered: "axfr", "ixfr", "ixfr-axfr" (IXFR
	// answered with the whole zone), "ixfr-uptodate" (one SOA), or the
	// refusal ("refused", "notauth", "badkey", "badsig", "badtime", ...).
	Mode string
}

// SetTransfers installs the zone transfer handler; nil refuses transfers
// on every transport (the pipeline's ingress answers REFUSED).
func (s *Server) SetTransfers(t Transfers) {
	if t == nil {
		s.transfers.Store(nil)
		return
	}
	s.transfers.Store(&t)
}

// IsTransfer reports whether msg is a QUERY for AXFR or IXFR: a stream
// transport hands such a message to ServeTransfer instead of the pipeline.
func IsTransfer(msg []byte) bool {
	h, err := wire.ParseHeader(msg)
	if err != nil || h.Flags&wire.FlagQR != 0 || h.Opcode() != dns.OpcodeQuery || h.QD != 1 {
		return false
	}
	// The question's type follows its name; names in a question are not
	// compressed by any client that sends transfers, and a compressed one
	// falls through to the pipeline (which refuses it).
	off := wire.HeaderLen
	for off < len(msg) {
		l := int(msg[off])
		if l == 0 {
			off++
			break
		}
		if l&0xC0 != 0 {
			return false
		}
		off += 1 + l
	}
	if off+2 > len(msg) {
		return false
	}
	t := binary.BigEndian.Uint16(msg[off:])
	return t == dns.TypeAXFR || t == dns.TypeIXFR
}

// HandlesTransfers reports whether a transfer handler is installed.
func (s *Server) HandlesTransfers() bool { return s.transfers.Load() != nil }

// ServeTransfer answers a transfer query read from a stream (TCP, DoT),
// writing each message with write, and logs it like a query. It returns
// false when no handler is installed (the caller runs the pipeline, which
// refuses).
func (s *Server) ServeTransfer(msg []byte, client netip.AddrPort, t Transport, write func([]byte) error) bool {
	p := s.transfers.Load()
	if p == nil {
		return false
	}
	start := time.Now()
	snap := s.snap.Load()
	res := (*p).Transfer(s.ctx, TransferRequest{Msg: msg, Client: client, Transport: t, Table: snap.in.Authority, Write: write})
	if !s.logging() {
		return true
	}
	rec := QueryRecord{
		Time: start, Client: client, Transport: t, Node: s.cfg.Node, Class: dns.ClassINET,
		Rcode: res.Rcode, Status: StatusAuthoritative, Reason: ReasonZoneTransfer, Zone: res.Zone,
		Duration: time.Since(start),
		// The query log has no transfer columns: the rule column carries
		// what a transfer log line needs (see docs/zone-transfers.md).
		Rule: transferRule(res),
	}
	if res.Refused || res.Rcode != dns.RcodeSuccess {
		rec.Status = StatusRefused
		if res.Rcode == dns.RcodeServerFailure {
			rec.Status = StatusFailed
		}
	}
	if q, err := wire.ParseQuestion(msg, wire.HeaderLen, new([wire.MaxNameLen]byte)); err == nil {
		rec.Type = q.Type
		rec.nameLen = uint8(copy(rec.name[:], q.Lower))
	}
	s.logger.Log(rec)
	return true
}

func transferRule(r TransferResult) string {
	out := r.Mode + " serial=" + strconv.FormatUint(uint64(r.Serial), 10) + " bytes=" + strconv.FormatInt(r.Bytes, 10) + " messages=" + strconv.Itoa(r.Messages)
	if r.Key != "" {
		out += " key=" + r.Key
	}
	return out
}
