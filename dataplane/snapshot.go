package dataplane

import (
	"context"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/dataplane/prefetch"
)

// ClientInfo is who the identify stage says the client is. The strings and
// slices are shared with the snapshot, never built per query.
type ClientInfo struct {
	Name   string
	Groups []string
}

// Identifier maps a client to its name and client groups. clientID is the
// client's self-declared ID from an encrypted transport (DoT/DoQ SNI label,
// DoH path segment; Query.ClientID), "" for none.
type Identifier interface {
	Identify(addr netip.Addr, clientID string) ClientInfo
}

// LocalAnswer is an answer from local data (rewrites, hosts entries).
type LocalAnswer struct {
	Rcode  int
	Answer []dns.RR
	Rule   string
	Policy string
}

// Local answers names the node serves from local data; ok=false passes on.
type Local interface {
	Resolve(qname []byte, qtype uint16, client ClientInfo) (LocalAnswer, bool)
}

// Verdict is the blocking stage's decision.
type Verdict uint8

const (
	VerdictPass Verdict = iota
	VerdictAllow
	VerdictBlock
	VerdictRewrite
)

// BlockMode is how a blocked name is answered.
type BlockMode uint8

const (
	BlockZeroIP BlockMode = iota
	BlockNXDomain
	BlockRefused
	BlockCustomIP
	BlockPage
)

// Decision is what a Blocker says about one query. Name fields must be
// strings owned by the compiled lists, not built per query.
type Decision struct {
	Verdict Verdict
	Mode    BlockMode
	TTL     time.Duration // 0 uses the snapshot's BlockTTL
	// IPv4 and IPv6 answer BlockCustomIP and BlockPage; invalid means NODATA.
	IPv4, IPv6 netip.Addr
	// Answer is a prebuilt answer for VerdictRewrite (safe search, rewrites).
	Answer     []dns.RR
	List, Rule string
	// RulePre and RulePost are the rule's text around Rule when Rule is
	// the name a list stores (adblock syntax: "||" Rule "^"). They are
	// constants, so a block by such a rule allocates nothing; RuleText
	// joins the three.
	RulePre, RulePost string
	// RuleIsName: the rule's name is the question's name (presentation,
	// lower case, no trailing dot) and Rule is empty: the Blocker did not
	// read it from the list (for a list of a million names, a cache miss
	// per block). Whoever writes the rule's text takes the name from the
	// question (Query.RuleText, the EDE, the query log).
	RuleIsName    bool
	Policy        string
	UpstreamGroup string // policy's upstream group, empty for the default
	NoLog         bool   // policy excludes these clients from the query log
	// EDECode and EDEText are the Extended DNS Error (RFC 8914) a block
	// answer carries when the client sent EDNS: 15 Blocked for a list rule,
	// 17 Filtered for a policy's own decision. EDECode 0 on a block means 15.
	EDECode uint16
	EDEText string
	// EDERule: the text is EDEText, " rule " and Rule (when Rule is not
	// empty), joined only when an answer carries it, so that a Blocker can
	// give a text prefix its table owns and a block allocates nothing.
	EDERule bool
	// ChaseCNAME asks the pipeline to resolve the target of the CNAME that
	// ends Answer (VerdictRewrite) through the upstream stage and append the
	// target's records (safe search, CNAME rewrites).
	ChaseCNAME bool
}

// ExtraText is the Extended DNS Error text of the decision (EDEText, with
// the rule when EDERule is set). It allocates when EDERule is set.
func (d Decision) ExtraText() string {
	if !d.EDERule || d.Rule == "" {
		return d.EDEText
	}
	return d.EDEText + ruleSep + d.RuleText()
}

// withRuleText is d with its rule's text in Rule: the question's name
// (presentation, no trailing dot) when RuleIsName. It allocates then.
func (d Decision) withRuleText(qname []byte) Decision {
	if d.RuleIsName {
		d.Rule, d.RuleIsName = ruleName(qname), false
	}
	return d
}

// RuleText is the rule's text: RulePre, Rule and RulePost joined. It
// allocates when there is a RulePre or RulePost.
func (d Decision) RuleText() string { return joinRule(d.RulePre, d.Rule, d.RulePost) }

func joinRule(pre, rule, post string) string {
	if pre == "" && post == "" {
		return rule
	}
	return pre + rule + post
}

// ruleSep joins EDEText and Rule when EDERule is set.
const ruleSep = " rule "

// Blocker decides on blocking for a name; nil turns blocking off.
type Blocker interface {
	// DecideInto writes the decision on qname (lower-case wire form) into
	// *d, the pipeline's Decision in its query: a 216-byte Decision
	// returned through the interface was copied out of the call for every
	// query that blocking applies to.
	DecideInto(qname []byte, qtype uint16, client ClientInfo, d *Decision)
}

// Prefetcher is a lookup table that can start loading, in stages, what a
// query's lookup will read, so that the cache misses of a batch of queries
// overlap instead of each stalling its own lookup (see package prefetch;
// the UDP batch loop uses it). policy.Table (Blocker) and authority.Table
// are Prefetchers. Every call is a hint: it must not change an answer.
type Prefetcher interface {
	// PrefetchStages is how many stages a query's prefetch has, at most
	// prefetch.MaxStages; 0 when the table is small enough to stay in the
	// CPU's caches and prefetching it would only cost time.
	PrefetchStages() int
	// PrefetchStart is stage 0: it starts the first loads for the
	// question qname (wire form, any case, as the datagram holds it) and
	// qtype, and sets *st for the next stage.
	PrefetchStart(qname []byte, qtype uint16, st *prefetch.State)
	// PrefetchStage runs stage 1 or later of the query whose state is *st,
	// once the loads of the stage before have had a query's time to land.
	PrefetchStage(stage int, st *prefetch.State)
}

// Forwarder is implemented by dataplane/upstream.
type Forwarder interface {
	// Forward sends req to the named upstream group (empty = the group chosen by
	// conditional forwarding for the name, else "default") and returns the answer
	// and the address of the upstream that gave it.
	Forward(ctx context.Context, group string, req *dns.Msg, client netip.Addr) (resp *dns.Msg, upstream string, err error)
}

// RawForwarder is a Forwarder that also returns the answer's bytes as the
// upstream sent them (appended to raw[:0]; nil when not at hand), so the
// cache can keep them instead of packing the records again, and that
// keeps nothing of req once it returns, so the request can be pooled.
// resp may be nil with rawOut set and a nil error: a NOERROR or NXDOMAIN
// answer left unparsed, whose bytes wire.ScanAnswer accepts (a light
// answer; stageUpstream unpacks it only when it must).
// upstream.Resolver is one.
type RawForwarder interface {
	Forwarder
	ForwardRaw(ctx context.Context, group string, req *dns.Msg, client netip.Addr, raw []byte) (resp *dns.Msg, rawOut []byte, upstream string, err error)
}

// Router says whether a name is conditionally forwarded; such answers are
// never cached.
type Router interface {
	Route(qname string) (group string, conditional bool)
}

// SnapshotInput gathers the parts of a Snapshot; every field may be nil.
type SnapshotInput struct {
	// Authority is the compiled zone table (authority.Compile).
	Authority  *authority.Table
	Identifier Identifier
	Local      Local
	Blocker    Blocker
	Forwarder  Forwarder
	Router     Router
	// BlockingEnabled is blocking.enabled; the per-node toggle sits on the Server.
	BlockingEnabled bool
	BlockTTL        time.Duration // default 10m
	// Version labels the snapshot in logs and tests.
	Version string
}

// Snapshot is the immutable world one query sees.
type Snapshot struct {
	in SnapshotInput
	// prefetchers are the tables of this snapshot worth prefetching (the
	// blocker while blocking is on, the zones), with their stage counts.
	prefetchers []Prefetcher
	stages      []int
}

// NewSnapshot builds a snapshot; it keeps the parts as given, so build them
// off the hot path before calling.
func NewSnapshot(in SnapshotInput) *Snapshot {
	if in.BlockTTL <= 0 {
		in.BlockTTL = 10 * time.Minute
	}
	s := &Snapshot{in: in}
	if p, ok := in.Blocker.(Prefetcher); ok && in.BlockingEnabled {
		s.addPrefetcher(p)
	}
	if in.Authority != nil {
		s.addPrefetcher(in.Authority)
	}
	return s
}

// maxPrefetchers bounds the tables a snapshot prefetches (the blocker and
// the zones): the UDP batch loop keeps a state per table and query.
const maxPrefetchers = 2

func (s *Snapshot) addPrefetcher(p Prefetcher) {
	if n := min(p.PrefetchStages(), prefetch.MaxStages); n > 0 && len(s.prefetchers) < maxPrefetchers {
		s.prefetchers = append(s.prefetchers, p)
		s.stages = append(s.stages, n)
	}
}

// Version returns the label given at construction.
func (s *Snapshot) Version() string { return s.in.Version }

// Authority is the snapshot's zone table (nil when none).
func (s *Snapshot) Authority() *authority.Table { return s.in.Authority }
