package dataplane

import (
	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/wire"
)

// notifyReceived answers a NOTIFY (RFC 1996). The service is the primary
// of its zones and the secondary of none, so a NOTIFY changes nothing: for
// a primary zone it serves the answer is NOERROR with AA (the sender, which
// lists this node among its secondaries, stops retrying), for any other
// name NOTAUTH (not authoritative, as BIND and Knot answer), never NOTIMP.
// A signed NOTIFY is verified first (RFC 8945 5.2): a wrong key, a bad MAC
// or a time outside the fudge is answered NOTAUTH with the TSIG error and
// logged; a good one is answered signed.
func (s *Server) notifyReceived(q *Query, h wire.Header) stageResult {
	q.qend = wire.HeaderLen
	// A TSIG is the last additional record; encode signs the answer (or
	// turns it into the TSIG error answer) when there is one.
	q.signed = h.AR > 0
	if h.QD != 1 {
		return q.fail(StatusMalformed, ReasonFormErr, dns.RcodeFormatError)
	}
	qq, err := wire.ParseQuestion(q.in, wire.HeaderLen, &q.lowerBuf)
	if err != nil {
		return q.fail(StatusMalformed, ReasonFormErr, dns.RcodeFormatError)
	}
	q.setQuestion(qq)
	if qq.Type != dns.TypeSOA || qq.Class != dns.ClassINET {
		// RFC 1996 3.2: a NOTIFY names the zone's SOA.
		return q.fail(StatusMalformed, ReasonFormErr, dns.RcodeFormatError)
	}
	if h.AR > 0 {
		if key, code := s.checkTSIG(q.in); code == dns.RcodeFormatError {
			return q.fail(StatusMalformed, ReasonFormErr, dns.RcodeFormatError)
		} else if code != 0 {
			zone, _, _ := dns.UnpackDomainName(q.in, wire.HeaderLen)
			s.log.Warn("NOTIFY refused: TSIG check failed", "client", q.Client.String(), "zone", zone,
				"key", key, "error", dns.RcodeToString[code])
			return q.fail(StatusRefused, ReasonZoneTransfer, dns.RcodeNotAuth)
		}
	}
	if t := q.snap.in.Authority; t != nil {
		if tz, ok := t.TransferZone(q.Lower); ok {
			q.Status, q.Reason, q.Rcode, q.aa, q.Zone = StatusAuthoritative, ReasonZoneTransfer, dns.RcodeSuccess, true, tz.Name()
			q.fast, q.resp = fastEmpty, nil
			s.log.Debug("NOTIFY for a zone this node is the primary of: nothing to do", "zone", tz.Name(), "client", q.Client.String())
			return stageDone
		}
	}
	return q.fail(StatusRefused, ReasonZoneTransfer, dns.RcodeNotAuth)
}
