package dataplane

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/cache"
	"github.com/svcdns/svc/dataplane/upstream"
	"github.com/svcdns/svc/dataplane/wire"
)

// Transport is how a query arrived.
type Transport uint8

const (
	TransportUDP Transport = iota
	TransportTCP
	TransportDoT
	TransportDoH
	TransportDoQ
	TransportDoH3
	TransportAPI
	numTransports
)

var transportNames = [numTransports]string{"udp", "tcp", "dot", "doh", "doq", "doh3", "api"}

// Encrypted reports whether t protects the messages on the wire (DoT,
// DoH, DoQ, DoH3): only there is EDNS padding worth its bytes.
func (t Transport) Encrypted() bool {
	return t == TransportDoT || t == TransportDoH || t == TransportDoQ || t == TransportDoH3
}

// Stream reports whether t is DNS over a TCP stream (RFC 7766 framing):
// TCP and DoT.
func (t Transport) Stream() bool { return t == TransportTCP || t == TransportDoT }

func (t Transport) String() string {
	if t < numTransports {
		return transportNames[t]
	}
	return "unknown"
}

// ParseTransport maps a spec protocol name to a Transport.
func ParseTransport(s string) (Transport, bool) {
	for i, n := range transportNames {
		if n == s {
			return Transport(i), true
		}
	}
	return 0, false
}

// Status is the class of an answer, shared by metrics, the query log and
// the API.
type Status uint8

const (
	StatusAnswered Status = iota // from an upstream
	StatusCached
	StatusStale
	StatusBlocked
	StatusRewritten
	StatusAuthoritative
	StatusLocal
	StatusControl
	StatusFailed
	StatusRefused
	StatusMalformed
	StatusDropped
	numStatuses
)

var statusNames = [numStatuses]string{"answered", "cached", "stale", "blocked", "rewritten", "authoritative", "local", "control", "failed", "refused", "malformed", "dropped"}

func (s Status) String() string {
	if s < numStatuses {
		return statusNames[s]
	}
	return "unknown"
}

// Reason is a bounded explanation of a status.
type Reason uint8

const (
	ReasonNone Reason = iota
	ReasonFormErr
	ReasonNotImp
	ReasonBadVers
	ReasonZoneTransfer
	ReasonClass
	ReasonHealth
	ReasonLameduck
	ReasonBlockList
	ReasonRewrite
	ReasonAllowed
	ReasonZone
	ReasonReferral
	ReasonNoUpstream
	ReasonUpstreamError
	ReasonUpstreamTimeout
	ReasonCacheServfail
	ReasonInternal // a stage panicked; contained into SERVFAIL
	numReasons
)

var reasonNames = [numReasons]string{"", "formerr", "notimp", "badvers", "zone_transfer", "class", "health", "lameduck", "block_list", "rewrite", "allowed", "zone", "referral", "no_upstream", "upstream_error", "upstream_timeout", "cached_servfail", "internal_error"}

func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "unknown"
}

type stageResult uint8

const (
	stageNext   stageResult = iota // pass on to the next stage
	stageDone                      // answer decided: skip to the log stage
	stageDrop                      // send nothing (still logged)
	stageDetach                    // continue on another goroutine (UDP slow path)
	stageAwait                     // sent upstream on the async lane, which owns q now
)

type fastKind uint8

const (
	fastNone  fastKind = iota
	fastEmpty          // header + question (+ OPT), rcode only
	fastAuth           // pre-encoded authoritative sections
	fastCache          // cached sections
)

// maxKeptBuffer bounds the buffers a pooled Query keeps after a large TCP
// message, so the pool does not pin memory.
const maxKeptBuffer = 16 << 10

// Query is the pooled per-query value every stage reads and writes: the
// stages pass state to each other only through it. Its fields are grouped
// by the stage that produces them (the "transport" writes before the
// pipeline runs and encodes after it; "answer" fields are written by
// whichever stage answers). Who writes and who reads each group:
//
//	group          written by                          read by
//	transport      listeners, ServeWire*, Server.Query  identify (Client, ClientID), authoritative
//	               (begin, udpPacket, serveTCP), ECS    and upstream (Client), every stage (snap),
//	               rewrites Client in identify          cache/upstream (cache), upstream
//	                                                     (detachable), encode (in, out), log
//	ingress        ingress (stageIngress, ingressSlow)  every later stage (Name, Lower, Type,
//	                                                     Class, EDNS, Flags), encode (ID, padding,
//	                                                     keepalive, slow), upstream (req)
//	identify       identify                            local, authoritative (groups), blocking, log
//	control        control                             blocking (blockingOff)
//	local          local (Policy, Rule of a rewrite)   log
//	authoritative  authoritative                       encode (aa, authWire, counts), log (Zone),
//	                                                     blocking and upstream (forwardGroup)
//	blocking       blocking                            cache and upstream (chase, chaseLower,
//	                                                     forwardGroup), encode (ede), log
//	cache          cache (and upstream via useEntry)   upstream (stale), encode (entry, ad)
//	upstream       upstream                            upstream (conditional), log (Upstream)
//	answer         the answering stage (control,       encode (resp, fast, Rcode), log (Status,
//	               local, authoritative, blocking,      Reason, Rcode), metrics
//	               cache, upstream; fail, shed, contain)
//	log            log                                 Server.Query, metrics (Duration)
//	pipeline       run                                 run (next: where a detached query resumes)
//
// Policy and Rule are written by local (a rewrite) and by blocking (a
// block), so they sit with blocking, the later writer. The order inside
// a group keeps the fields the fast path touches (transport, ingress,
// answer) in the first cache lines; the 255-byte lowerBuf is last.
type Query struct {
	// Transport: set before the pipeline runs.
	Client    netip.AddrPort // rewritten by identify to a trusted forwarder's ECS address
	Transport Transport
	// ClientID is the client's self-declared ID from an encrypted
	// transport (DoT/DoQ SNI label, DoH path segment); "" for none.
	ClientID   string
	Node       string
	Start      time.Time
	in         []byte       // the request (owned by the transport's buffer)
	out        []byte       // the answer encode writes, the transport sends
	snap       *Snapshot    // the configuration this query is answered with
	cache      *cache.Cache // the snapshot's cache, loaded once
	detachable bool         // the UDP slow path may continue on a worker (stageDetach)
	lane       *udpLoop     // the UDP read loop's, for the async lane (Server.startAsync)
	// ecsChecked: the peer's trust for ECS has been looked at (the UDP
	// read loop does it before rate limiting); ecsClient: Client is the
	// address of the ECS option of a listeners.ecsClientFrom forwarder.
	ecsChecked, ecsClient bool

	// Ingress: the parsed request.
	ID        uint16
	Flags     uint16 // request header flags
	Name      []byte // question name as received (aliases the input)
	Lower     []byte // lower-cased question name, aliases lowerBuf
	Type      uint16
	Class     uint16
	EDNS      wire.EDNS
	qend      int  // end of the question in in (-1: not echoable); read by nobody today
	slow      bool // the request needs the full parser (q.req)
	padding   bool // the request's OPT carries a Padding option (RFC 7830)
	keepalive bool // and an edns-tcp-keepalive option (RFC 7828)
	signed    bool // additional records besides OPT: maybe a TSIG (encode signs the answer)
	req       *dns.Msg

	// Identify.
	ClientInfo ClientInfo
	// inGroupFn is q.inGroup bound once per pooled value, so handing it to
	// the zone lookup allocates nothing per query.
	inGroupFn func(string) bool

	// Control.
	blockingOff bool // this node's blocking is switched off

	// Authoritative.
	// Zone is the apex (presentation form) of the authoritative zone that
	// answered, "" when none did; the string is the table's, not a copy.
	Zone     string
	aa       bool
	authWire []byte    // pre-encoded sections of the fast authoritative answer
	counts   [3]uint16 // their record counts (answer, authority, additional)
	// forwardGroup: the upstream group a forward zone (authoritative) or
	// the policy (blocking, when no zone chose one) sends the query to.
	forwardGroup string

	// Blocking (Policy and Rule also from local). RulePre and RulePost
	// wrap Rule as in Decision.
	List, Rule        string
	RulePre, RulePost string
	Policy            string
	NoLog             bool
	// ede is the Extended DNS Error added to the OPT of a block answer.
	ede *dns.EDNS0_EDE
	// The fast block answer (issue #27 item 2): its one record, if any
	// (authWire points into blockRR), and its EDE, written by encodeFast
	// as encodeSlow writes ede, without a dns.Msg.
	blockRR [blockRRLen]byte
	// logLater: the log stage leaves the query to the UDP batch loop,
	// which logs it (logAnswered) once the batch is answered, before the
	// answers are sent, and marks it logPending.
	logLater, logPending bool
	// freshHit: a fresh cache hit that the UDP batch counts with its
	// answers (statsBatch) instead of at once.
	freshHit bool
	// ruleIsName: the rule's name is the question's (Decision.RuleIsName);
	// Rule is empty.
	ruleIsName bool
	// decision is the blocking stage's (Blocker.DecideInto writes it).
	decision Decision
	fastEDE  bool
	edeCode  uint16
	edeText  string
	edeRule  bool // the rule (RulePre, Rule, RulePost) follows edeText after ruleSep (Decision.EDERule)
	// chase holds a rewrite's records ending in a CNAME whose target
	// (chaseLower, lower-case wire) the cache and upstream stages resolve.
	chase      []dns.RR
	chaseLower []byte

	// Cache.
	entry *cache.Entry // the cached answer encode copies
	stale *cache.Entry // an expired entry upstream may serve when it fails
	// cacheNow is the time the cache stage looked the query up
	// (Cache.NowOr: the receive time), which encode counts TTLs to.
	cacheNow time.Time
	ad       bool

	// Upstream.
	Upstream      string
	UpstreamGroup string // the group asked; read by nobody today
	conditional   bool

	// Answer: written by the stage that answers.
	Status Status
	Reason Reason
	Rcode  int
	resp   *dns.Msg // the slow-path answer
	fast   fastKind // or which fast encoding applies

	// Log.
	Duration time.Duration

	// Pipeline: the stage a detached query resumes at.
	next int

	lowerBuf [wire.MaxNameLen]byte // backs Lower (ingress)
	// The async lane (cold, at the end): set while the query is upstream.
	async struct {
		job      job               // its answer's way back and its budget, as a worker's
		deadline time.Time         // of the forward
		handoff  *upstream.Handoff // the lane handed the query off (Resume)
		raw      []byte            // the light answer, during AsyncLight
		up       string
	}
}

func (q *Query) inGroup(group string) bool { return slices.Contains(q.ClientInfo.Groups, group) }

func (q *Query) reset() {
	in, out := q.in, q.out
	if cap(in) > maxKeptBuffer {
		in = make([]byte, 0, 4096)
	}
	if cap(out) > maxKeptBuffer {
		out = make([]byte, 0, 4096)
	}
	fn := q.inGroupFn
	// Cleared in place and the kept fields set after: a literal with
	// fields was built in a 1.2 KB temporary and copied over q, its
	// 16-byte loads stalling on the 8-byte field stores.
	*q = Query{}
	q.in, q.out, q.inGroupFn = in[:0], out[:0], fn
}

var queryPool = sync.Pool{New: func() any {
	q := &Query{in: make([]byte, 0, 4096), out: make([]byte, 0, 4096)}
	q.inGroupFn = q.inGroup
	return q
}}

func getQuery() *Query { return queryPool.Get().(*Query) }

func putQuery(q *Query) {
	q.reset()
	queryPool.Put(q)
}

// QueryRecord is the copy of a finished query handed to the QueryLogger.
type QueryRecord struct {
	Time       time.Time
	Client     netip.AddrPort
	Transport  Transport
	Node       string
	name       [wire.MaxNameLen]byte
	nameLen    uint8
	Type       uint16
	Class      uint16
	Rcode      int
	Status     Status
	Reason     Reason
	ClientID   string // from the transport (Query.ClientID), "" for none
	ClientName string
	Groups     []string
	List, Rule string
	// RulePre and RulePost wrap Rule as in Decision: RuleText joins them
	// (off the DNS path).
	RulePre, RulePost string
	// RuleIsName: the rule's name is the question's name as the query log
	// writes it (an exact-domain list entry), between RulePre and RulePost;
	// Rule is that name or empty (Decision.RuleIsName). Compared when the
	// rule's bytes were just read by the match; the logger reading them
	// again, from a list of a million names, cost it a cache miss per
	// blocked row.
	RuleIsName bool
	Policy     string
	Upstream   string
	// Zone is the apex of the authoritative zone that answered ("" for
	// none), e.g. "example.com."; owned by the authority table.
	Zone     string
	Duration time.Duration
}

// RuleText is the rule's text (Decision.RuleText).
func (r *QueryRecord) RuleText() string {
	if r.RuleIsName && r.Rule == "" {
		return joinRule(r.RulePre, ruleName(r.name[:r.nameLen]), r.RulePost)
	}
	return joinRule(r.RulePre, r.Rule, r.RulePost)
}

// ruleName is the name of a rule that is the question's
// (Decision.RuleIsName, set for wire.Dotted's plain names only). It
// allocates.
func ruleName(name []byte) string {
	var buf [256]byte
	b, _ := wire.Dotted(&buf, name)
	return string(b)
}

// RuleText is the rule's text (Decision.RuleText).
func (q *Query) RuleText() string {
	if q.ruleIsName {
		return joinRule(q.RulePre, ruleName(q.Lower), q.RulePost)
	}
	return joinRule(q.RulePre, q.Rule, q.RulePost)
}

// Name returns the question name in presentation form, lower-cased.
func (r *QueryRecord) Name() string {
	return string(r.AppendName(nil))
}

// AppendName appends the question name in presentation form, lower-cased,
// to dst: Name without the allocation.
func (r *QueryRecord) AppendName(dst []byte) []byte {
	return wire.AppendPresentation(dst, r.name[:r.nameLen])
}

// QueryLogger receives a record per query. Log must not block: drop when full.
type QueryLogger interface {
	Log(rec QueryRecord)
}

// InPlaceLogger is a QueryLogger that lets the data plane write each record
// straight into its buffer: LogFrom reserves a zeroed record, has src fill
// it and keeps it, or drops it as Log would. A record built on the stack
// and passed by value was copied twice on the way (520 bytes into the
// call, again into the buffer), for every logged query. internal/dnslog's
// Logger is one; Log stays for records not made from a Query (transfers).
type InPlaceLogger interface {
	QueryLogger
	LogFrom(src RecordSource)
}

// RecordSource fills a query log record; *Query is one.
type RecordSource interface {
	FillRecord(rec *QueryRecord)
}

// FillRecord writes the finished query's record into rec, which is zero
// (RecordSource).
func (q *Query) FillRecord(rec *QueryRecord) {
	rec.Time, rec.Client, rec.Transport, rec.Node = q.Start, q.Client, q.Transport, q.Node
	rec.Type, rec.Class, rec.Rcode, rec.Status, rec.Reason = q.Type, q.Class, q.Rcode, q.Status, q.Reason
	rec.ClientID, rec.ClientName, rec.Groups = q.ClientID, q.ClientInfo.Name, q.ClientInfo.Groups
	rec.List, rec.Rule, rec.RulePre, rec.RulePost = q.List, q.Rule, q.RulePre, q.RulePost
	rec.Policy, rec.Upstream, rec.Zone, rec.Duration = q.Policy, q.Upstream, q.Zone, q.Duration
	rec.nameLen = uint8(copy(rec.name[:], q.Lower))
	rec.RuleIsName = q.ruleIsName || q.Rule != "" && q.RulePre == "" && q.RulePost == "" && wire.IsPresentation(q.Lower, q.Rule)
}

// loggingSwitch is implemented by query loggers that can be switched off
// at run time (querylog.enabled): while off, the record is not even built.
type loggingSwitch interface{ Enabled() bool }

// typeNames and rcodeNames hold every name the library has for types below
// 256 and rcodes below 32 (an empty entry: unnamed, no map lookup needed):
// the query log names every row's type and rcode, and the maps' lookups
// were 0.5% of a server logging at full rate.
var (
	typeNames = func() (a [256]string) {
		for t, s := range dns.TypeToString {
			if int(t) < len(a) {
				a[t] = s
			}
		}
		return a
	}()
	rcodeNames = func() (a [32]string) {
		for c, s := range dns.RcodeToString {
			if c >= 0 && c < len(a) {
				a[c] = s
			}
		}
		return a
	}()
)

// TypeString names a record type as presentation format does ("A",
// "TYPE65280" for unnamed ones), so code outside the data plane needs no
// DNS library of its own.
func TypeString(t uint16) string {
	if int(t) < len(typeNames) {
		if s := typeNames[t]; s != "" {
			return s
		}
	} else if s, ok := dns.TypeToString[t]; ok {
		return s
	}
	return "TYPE" + strconv.Itoa(int(t))
}

// ParseType maps a type name ("aaaa", "TYPE65") to its number.
func ParseType(s string) (uint16, bool) {
	u := strings.ToUpper(s)
	if t, ok := dns.StringToType[u]; ok {
		return t, true
	}
	if n, ok := strings.CutPrefix(u, "TYPE"); ok {
		v, err := strconv.ParseUint(n, 10, 16)
		return uint16(v), err == nil
	}
	return 0, false
}

// RcodeString names a response code ("NXDOMAIN", "RCODE12" for unnamed).
func RcodeString(c int) string {
	if c >= 0 && c < len(rcodeNames) {
		if s := rcodeNames[c]; s != "" {
			return s
		}
	} else if s, ok := dns.RcodeToString[c]; ok {
		return s
	}
	return "RCODE" + strconv.Itoa(c)
}
