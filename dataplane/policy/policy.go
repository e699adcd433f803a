// Package policy compiles ClientGroup and Policy objects into an immutable
// table that the data plane's identify and blocking stages use: it
// implements dataplane.Identifier (Groups) and dataplane.Blocker (Table).
package policy

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/blocklist"
	"github.com/svcdns/svc/dataplane/catalogue"
	"github.com/svcdns/svc/dataplane/safesearch"
	"github.com/svcdns/svc/dataplane/wire"
)

// Settings are the blocking.* and blockPage.* settings a table needs.
type Settings struct {
	// DefaultResponse is blocking.defaultResponse (zeroIP when empty).
	DefaultResponse string
	// BlockTTL is blocking.blockTTL (10m when zero).
	BlockTTL time.Duration
	// CustomIPv4/6 are blocking.customIP.v4/.v6; invalid answers NODATA.
	CustomIPv4, CustomIPv6 netip.Addr
	// BlockPageIPv4/6 are blockPage.ipv4/.ipv6.
	BlockPageIPv4, BlockPageIPv6 netip.Addr
}

// List is one compiled BlockList and the parts of its object that decide
// how its blocks are answered.
type List struct {
	Object   *v1alpha1.BlockList
	Compiled *blocklist.List
	// scoped: the list's entries confined to client groups (Compile fills it)
	scoped []scopedList
}

// Input gathers what a table is compiled from.
type Input struct {
	Groups     []v1alpha1.ClientGroup
	Policies   []v1alpha1.Policy
	Lists      []List
	Catalogue  *catalogue.Catalogue
	SafeSearch *safesearch.Table
	Settings   Settings
	// Now is the clock schedules are evaluated against (time.Now when nil).
	Now func() time.Time
	// Tenancy confines policies to their namespace; nil is unconfined.
	Tenancy *Tenancy
}

// Special list names in decisions and the query log.
const (
	ListSafeSearch = "safesearch"
	ListRewrite    = "rewrite"
)

// GlobalPolicy names the implicit lowest-priority policy made of the
// global BlockLists (spec.global omitted or true); it applies to every
// client no Policy matches. Clients a Policy matches get the global lists
// through that policy (unless it opts out).
const GlobalPolicy = "(global)"

type listRef struct {
	name       string // namespace/name
	list       *blocklist.List
	mode       dataplane.BlockMode
	modeSet    bool
	ipv4, ipv6 netip.Addr
	scoped     []scopedList // entries for some client groups only
	// ede is the Extended DNS Error text of this policy's blocks by the
	// list, without the rule (Decision.EDERule joins it when an answer
	// carries it): a block builds no string.
	ede string
}

// match looks name up in the list, then in its entries for the client's
// groups. The list returned renders the deciding rule.
func (l *listRef) match(name []byte, groups []string) (blocklist.Match, *blocklist.List) {
	m := l.list.MatchBytes(name)
	if m.Matched || len(l.scoped) == 0 {
		return m, l.list
	}
	for i := range l.scoped {
		s := &l.scoped[i]
		if !s.appliesTo(groups) {
			continue
		}
		if sm := s.list.MatchBytes(name); sm.Matched {
			return sm, s.list
		}
	}
	return m, l.list
}

type rewrite struct {
	name    string // presentation, lower case, with trailing dot ("*.x." for wildcards)
	rule    string
	qtype   uint16 // type of targets
	cname   bool
	answers []dns.RR // owner = name
}

type compiled struct {
	name      string
	namespace string
	priority  int32
	all       bool
	groups    []string
	groupSet  map[string]struct{}
	allow     []listRef
	block     []listRef
	allowOnly bool
	refused   bool      // by the tenancy rules: never chosen
	uses      []ListUse // effective lists with why each applies (State)
	modeSet   bool
	mode      dataplane.BlockMode
	ttl       time.Duration
	services  *blocklist.List
	noLog     bool
	exact     map[string]*rewrite // key: lower-case wire name
	wildcard  map[string]*rewrite // key: lower-case wire name of the parent
	safe      bool
	safeMode  safesearch.Mode
	schedule  *window
	upstream  string
	// edeAllowOnly is the EDE text of an allowOnly block.
	edeAllowOnly string
}

// setEDE precomputes the Extended DNS Error texts of the policy's blocks.
func (p *compiled) setEDE() {
	for i := range p.block {
		p.block[i].ede = EDEText(dataplane.Decision{Policy: p.name, List: p.block[i].name})
	}
	p.edeAllowOnly = EDEText(dataplane.Decision{Policy: p.name, Verdict: dataplane.VerdictBlock})
}

// Table is the compiled world of policies. It is immutable and safe for
// concurrent use.
type Table struct {
	groups   *Groups
	policies []*compiled // by priority descending, then name
	global   *compiled   // global lists, for clients no policy matches; may be nil
	byName   map[string]*compiled
	settings Settings
	// defaultMode is settings.DefaultResponse parsed once (zeroIP when
	// empty or unknown), not per blocked query.
	defaultMode dataplane.BlockMode
	safe        *safesearch.Table
	now         func() time.Time
	problems    []Problem
	bufs        sync.Pool
	// prefetch: the large lists any policy may probe, for Prefetch.
	prefetch []*blocklist.List
}

// Compile builds a table. Problems (unknown services, categories, lists,
// groups, bad time zones) are returned; what they affect is skipped and the
// rest applies.
func Compile(ctx context.Context, in Input) (*Table, []Problem) {
	g, problems := CompileGroups(in.Groups)
	t := &Table{groups: g, byName: map[string]*compiled{}, settings: in.Settings, safe: in.SafeSearch, now: in.Now}
	if t.now == nil {
		t.now = time.Now
	}
	t.defaultMode, _ = ParseBlockMode(t.settings.DefaultResponse)
	if t.settings.BlockTTL <= 0 {
		t.settings.BlockTTL = 10 * time.Minute
	}
	t.bufs.New = func() any { return new([256]byte) }
	lists := withScoped(ctx, listMap(in))
	globals := globalKeys(lists)
	groupNames := map[string]bool{}
	for _, n := range g.names {
		groupNames[n] = true
	}
	for i := range in.Policies {
		if ctx.Err() != nil {
			break
		}
		p := &in.Policies[i]
		if refusals := in.Tenancy.admit(p); len(refusals) > 0 {
			// refused as a whole: a partly applied policy could still
			// reach clients it may not select
			problems = append(problems, refusals...)
			t.byName[key(p.Namespace, p.Name)] = &compiled{name: key(p.Namespace, p.Name), namespace: p.Namespace,
				priority: p.Spec.Priority, refused: true, groupSet: map[string]struct{}{}}
			continue
		}
		uses, probs := listsOf(in.Tenancy, p, lists, globals)
		problems = append(problems, probs...)
		c, probs := compilePolicy(p, lists, uses, groupNames, in.Catalogue, t.settings)
		problems = append(problems, probs...)
		t.policies = append(t.policies, c)
		t.byName[c.name] = c
	}
	sort.SliceStable(t.policies, func(i, j int) bool {
		a, b := t.policies[i], t.policies[j]
		if a.priority != b.priority {
			return a.priority > b.priority
		}
		return a.name < b.name
	})
	t.global = globalPolicy(lists, globals, t.settings)
	t.prefetch = prefetchLists(append(slices.Clone(t.policies), t.global))
	t.problems = problems
	return t, problems
}

// globalPolicy builds the implicit policy of the global lists (ordered by
// name) for clients no policy matches: a user who only applies a BlockList
// gets blocking for every client. Every namespace's global lists are in it,
// as before tenancy rules. nil when there is no loaded global block list.
func globalPolicy(lists map[string]*List, globals []string, set Settings) *compiled {
	g := &compiled{name: GlobalPolicy, all: true, ttl: set.BlockTTL, groupSet: map[string]struct{}{}}
	for _, k := range globals {
		if lists[k].Compiled == nil {
			continue
		}
		lr := newListRef(k, lists[k])
		if lists[k].Compiled.Spec().Mode == blocklist.ModeAllow {
			g.allow = append(g.allow, lr)
		} else {
			g.block = append(g.block, lr)
		}
	}
	if len(g.block) == 0 {
		return nil
	}
	g.setEDE()
	return g
}

func newListRef(k string, l *List) listRef {
	lr := listRef{name: k, list: l.Compiled, scoped: l.scoped}
	if l.Object.Spec.Response != "" {
		lr.mode, lr.modeSet = ParseBlockMode(l.Object.Spec.Response)
	}
	if ci := l.Object.Spec.CustomIP; ci != nil {
		lr.ipv4, _ = netip.ParseAddr(ci.V4)
		lr.ipv6, _ = netip.ParseAddr(ci.V6)
	}
	return lr
}

// Groups returns the identification table (a dataplane.Identifier).
func (t *Table) Groups() *Groups { return t.groups }

// Problems returns what Compile reported.
func (t *Table) Problems() []Problem { return append([]Problem(nil), t.problems...) }

// ParseBlockMode maps spec names to dataplane modes.
func ParseBlockMode(s string) (dataplane.BlockMode, bool) {
	switch s {
	case "zeroIP":
		return dataplane.BlockZeroIP, true
	case "nxdomain":
		return dataplane.BlockNXDomain, true
	case "refused":
		return dataplane.BlockRefused, true
	case "customIP":
		return dataplane.BlockCustomIP, true
	case "blockPage":
		return dataplane.BlockPage, true
	}
	return dataplane.BlockZeroIP, false
}

func ref(ns, r string) string {
	if strings.Contains(r, "/") {
		return r
	}
	return key(ns, r)
}

func compilePolicy(p *v1alpha1.Policy, lists map[string]*List, uses []ListUse, groups map[string]bool, cat *catalogue.Catalogue, set Settings) (*compiled, []Problem) {
	name := key(p.Namespace, p.Name)
	var probs []Problem
	bad := func(reason, format string, args ...any) {
		probs = append(probs, Problem{"Policy", name, reason, fmt.Sprintf(format, args...)})
	}
	s := &p.Spec
	c := &compiled{name: name, namespace: p.Namespace, priority: s.Priority, groupSet: map[string]struct{}{},
		uses: uses, allowOnly: s.AllowOnly, noLog: s.QueryLog != nil && !*s.QueryLog, upstream: s.UpstreamGroup, safe: s.SafeSearch}
	c.all = len(s.ClientGroupRefs) == 0
	for _, gr := range s.ClientGroupRefs {
		k := ref(p.Namespace, gr)
		if !groups[k] {
			bad(ReasonUnknownClientGroup, "client group %s does not exist", k)
		}
		if _, dup := c.groupSet[k]; !dup {
			c.groupSet[k] = struct{}{}
			c.groups = append(c.groups, k)
		}
	}
	if s.BlockMode != "" {
		c.mode, c.modeSet = ParseBlockMode(s.BlockMode)
	}
	if s.BlockTTL != "" {
		d, err := time.ParseDuration(s.BlockTTL)
		if err != nil {
			bad("InvalidBlockTTL", "blockTTL %q: %v", s.BlockTTL, err)
		} else {
			c.ttl = d
		}
	}
	if c.ttl <= 0 {
		c.ttl = set.BlockTTL
	}
	c.safeMode, _ = safesearch.ParseMode(s.SafeSearchMode)
	// own lists first (in the policy's order), then the global ones; allow
	// lists are checked before every block list either way
	for _, u := range uses {
		if !u.Applied {
			if u.Why == WhyOwn {
				bad(ReasonUnknownList, "block list %s does not exist", u.List)
			}
			continue
		}
		l := lists[u.List]
		if l.Compiled == nil {
			if u.Why == WhyOwn {
				// the list's own status says why
				bad(ReasonListNotLoaded, "block list %s is not loaded", u.List)
			}
			continue
		}
		lr := newListRef(u.List, l)
		if u.Role == "allow" {
			c.allow = append(c.allow, lr)
		} else {
			c.block = append(c.block, lr)
		}
	}
	if cat != nil {
		c.services, probs = compileServices(s, cat, name, probs)
	} else if len(s.BlockedServices)+len(s.BlockedCategories) > 0 {
		bad("CatalogueUnavailable", "no catalogue loaded")
	}
	if s.Schedule != nil {
		w, err := parseWindow(s.Schedule)
		if err != nil {
			// Never active: an unusable schedule must not mean "always".
			bad("InvalidSchedule", "%v; the policy is never active until the schedule is fixed", err)
			w = &window{never: true}
		}
		c.schedule = w
	}
	for i, rw := range s.Rewrites {
		if err := c.addRewrite(rw); err != nil {
			bad("InvalidRewrite", "rewrites[%d]: %v", i, err)
		}
	}
	c.setEDE()
	return c, probs
}

// compileServices builds one list whose sources are the blocked services:
// blockedServices (and the services they require) plus the services of
// blockedCategories minus allowedServices. Source names are "service:<id>".
func compileServices(s *v1alpha1.PolicySpec, cat *catalogue.Catalogue, name string, probs []Problem) (*blocklist.List, []Problem) {
	ids := map[string]bool{}
	var order []string
	add := func(id string) {
		if !ids[id] {
			ids[id] = true
			order = append(order, id)
		}
	}
	var explicit func(id string, depth int)
	explicit = func(id string, depth int) {
		svc, ok := cat.Service(id)
		if !ok {
			if depth == 0 {
				probs = append(probs, Problem{"Policy", name, "UnknownService", fmt.Sprintf("service %q is not in the catalogue", id)})
			}
			return
		}
		add(id)
		if depth < 4 {
			for _, r := range svc.Requires {
				explicit(r, depth+1)
			}
		}
	}
	for _, id := range s.BlockedServices {
		explicit(id, 0)
	}
	allowed := map[string]bool{}
	for _, id := range s.AllowedServices {
		if !cat.HasService(id) {
			probs = append(probs, Problem{"Policy", name, "UnknownService", fmt.Sprintf("allowed service %q is not in the catalogue", id)})
		}
		allowed[id] = true
	}
	for _, cid := range s.BlockedCategories {
		if !cat.HasCategory(cid) {
			probs = append(probs, Problem{"Policy", name, "UnknownCategory", fmt.Sprintf("category %q is not in the catalogue", cid)})
			continue
		}
		for _, id := range cat.CategoryServices(cid) {
			if !allowed[id] {
				add(id)
			}
		}
	}
	if len(order) == 0 {
		return nil, probs
	}
	srcs := make([]*blocklist.Source, 0, len(order))
	for _, id := range order {
		srcs = append(srcs, cat.Source(id))
	}
	return blocklist.NewList(blocklist.ListSpec{Name: "services", Mode: blocklist.ModeBlock}, srcs), probs
}

func (c *compiled) addRewrite(rw v1alpha1.Rewrite) error {
	n := strings.ToLower(dns.Fqdn(strings.TrimSpace(rw.Name)))
	wild := strings.HasPrefix(n, "*.")
	base := n
	if wild {
		base = n[2:]
	}
	wire := make([]byte, 256)
	l, err := dns.PackDomainName(base, wire, 0, nil, false)
	if err != nil {
		return fmt.Errorf("name %q: %w", rw.Name, err)
	}
	r := &rewrite{name: n, rule: rw.Name}
	switch {
	case rw.CNAME != "":
		r.cname, r.qtype = true, dns.TypeCNAME
		r.answers = []dns.RR{&dns.CNAME{Hdr: dns.RR_Header{Name: n, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 300}, Target: dns.Fqdn(rw.CNAME)}}
	case len(rw.Targets) > 0:
		typ := rw.Type
		if typ == "" {
			typ = "A"
			if a, err := netip.ParseAddr(rw.Targets[0]); err == nil && a.Is6() {
				typ = "AAAA"
			}
		}
		qt, ok := dns.StringToType[typ]
		if !ok {
			return fmt.Errorf("unknown type %q", typ)
		}
		r.qtype = qt
		for _, tg := range rw.Targets {
			rr, err := dns.NewRR(fmt.Sprintf("%s 300 IN %s %s", n, typ, tg))
			if err != nil || rr == nil {
				return fmt.Errorf("target %q: %v", tg, err)
			}
			r.answers = append(r.answers, rr)
		}
	default:
		return fmt.Errorf("name %q has neither cname nor targets", rw.Name)
	}
	if wild {
		if c.wildcard == nil {
			c.wildcard = map[string]*rewrite{}
		}
		c.wildcard[string(wire[:l])] = r
	} else {
		if c.exact == nil {
			c.exact = map[string]*rewrite{}
		}
		c.exact[string(wire[:l])] = r
	}
	return nil
}

// choose returns the policy that applies to the client now: the one with
// the highest priority whose groups include one of the client's and whose
// schedule is active, else the global policy of unreferenced lists.
//
// The clock is read only for a policy with a schedule: a query to a node
// without schedules reads no clock here (a clock read was one tenth of a
// blocked answer's CPU time on a VM).
func (t *Table) choose(client dataplane.ClientInfo) *compiled {
	var now time.Time
	for _, p := range t.policies {
		if !p.applies(client.Groups) {
			continue
		}
		if p.schedule != nil {
			if now.IsZero() {
				now = t.now()
			}
			if !p.schedule.active(now) {
				continue
			}
		}
		return p
	}
	return t.global
}

func (p *compiled) applies(groups []string) bool {
	if p.all {
		return true
	}
	for _, g := range groups {
		if _, ok := p.groupSet[g]; ok {
			return true
		}
	}
	return false
}

// Decide implements dataplane.Blocker. qname is the lower-case wire-format
// query name. Order inside the chosen policy: rewrites; allow lists (they
// win over every service and block list); blocked services and categories;
// block lists; allowOnly; then safe search for what was not blocked. Safe
// search comes after the blocks because it is not a permission: a policy
// that blocks a video site and turns on safe search means "blocked", not
// "restricted mode" (it used to answer the safe-search target). Passing
// and allowing allocate nothing, and so does a block by a hosts or domains
// line (its EDE text is the list's, joined with the rule only when an answer
// carries it); an adblock rule's text and a blocked service's EDE text are
// still built per block.
//
// Decide gives the rule's text in Rule; DecideInto may leave it to the
// caller to take from the name (Decision.RuleIsName).
func (t *Table) Decide(qname []byte, qtype uint16, client dataplane.ClientInfo) (d dataplane.Decision) {
	t.DecideInto(qname, qtype, client, &d)
	if d.RuleIsName {
		var buf [256]byte
		name, _ := wire.Dotted(&buf, qname)
		d.Rule, d.RuleIsName = string(name), false
	}
	return d
}

// DecideInto is Decide writing into *d (dataplane.Blocker).
func (t *Table) DecideInto(qname []byte, qtype uint16, client dataplane.ClientInfo, d *dataplane.Decision) {
	*d = dataplane.Decision{}
	p := t.choose(client)
	if p == nil {
		return
	}
	d.Policy, d.UpstreamGroup, d.NoLog = p.name, p.upstream, p.noLog
	if rw := p.rewriteFor(qname); rw != nil {
		*d = p.rewriteDecision(*d, rw, qname, qtype)
		return
	}
	buf := t.bufs.Get().(*[256]byte)
	defer t.bufs.Put(buf)
	name, plain := wire.Dotted(buf, qname)
	allowedBy := -1
	for i := range p.allow {
		if m, _ := p.allow[i].match(name, client.Groups); m.Matched {
			allowedBy = i
			break
		}
	}
	if allowedBy < 0 {
		if p.services != nil {
			if m := p.services.MatchBytes(name); m.Matched {
				d.Verdict, d.List = dataplane.VerdictBlock, p.services.SourceName(m)
				d.RulePre, d.Rule, d.RulePost = p.services.RuleParts(m)
				t.answer(d, p, nil)
				d.EDEText = EDEText(*d)
				return
			}
		}
		for i := range p.block {
			if m, l := p.block[i].match(name, client.Groups); m.Matched {
				d.Verdict, d.List = dataplane.VerdictBlock, p.block[i].name
				if pre, post, ok := l.NameRule(m); ok && plain {
					// The rule's name is the query's: the caller takes it
					// from there, and the rule's record, a cache miss in a
					// large list, is not read.
					d.RulePre, d.RulePost, d.RuleIsName = pre, post, true
				} else {
					d.RulePre, d.Rule, d.RulePost = l.RuleParts(m)
				}
				t.answer(d, p, &p.block[i])
				d.EDEText, d.EDERule = p.block[i].ede, true
				return
			}
		}
		if p.allowOnly {
			d.Verdict = dataplane.VerdictBlock
			t.answer(d, p, nil)
			d.EDEText = p.edeAllowOnly
			return
		}
	}
	if p.safe && t.safe != nil {
		if ans, _, ok := t.safe.Lookup(qname, p.safeMode); ok {
			d.Verdict, d.Answer, d.List, d.ChaseCNAME = dataplane.VerdictRewrite, ans, ListSafeSearch, true
			return
		}
	}
	if allowedBy >= 0 {
		d.Verdict, d.List = dataplane.VerdictAllow, p.allow[allowedBy].name
	}
}

// answer fills mode, TTL, addresses and the EDE code: the policy's
// blockMode, else the list's response, else blocking.defaultResponse. The
// caller sets the EDE text.
func (t *Table) answer(d *dataplane.Decision, p *compiled, l *listRef) {
	mode := t.defaultMode
	switch {
	case p.modeSet:
		mode = p.mode
	case l != nil && l.modeSet:
		mode = l.mode
	}
	d.Mode, d.TTL = mode, p.ttl
	d.EDECode = EDECode(*d)
	switch mode {
	case dataplane.BlockCustomIP:
		d.IPv4, d.IPv6 = t.settings.CustomIPv4, t.settings.CustomIPv6
		if l != nil && (l.ipv4.IsValid() || l.ipv6.IsValid()) {
			d.IPv4, d.IPv6 = l.ipv4, l.ipv6
		}
	case dataplane.BlockPage:
		d.IPv4, d.IPv6 = t.settings.BlockPageIPv4, t.settings.BlockPageIPv6
	}
}

func (p *compiled) rewriteFor(qname []byte) *rewrite {
	if p.exact != nil {
		if r, ok := p.exact[string(qname)]; ok {
			return r
		}
	}
	if p.wildcard == nil {
		return nil
	}
	// walk parent names: "*.x" matches names below x, not x itself.
	for off := 0; off < len(qname) && qname[off] != 0; {
		off += int(qname[off]) + 1
		if off >= len(qname) {
			break
		}
		if r, ok := p.wildcard[string(qname[off:])]; ok {
			return r
		}
	}
	return nil
}

func (p *compiled) rewriteDecision(d dataplane.Decision, rw *rewrite, qname []byte, qtype uint16) dataplane.Decision {
	d.Verdict, d.List, d.Rule, d.ChaseCNAME = dataplane.VerdictRewrite, ListRewrite, rw.rule, rw.cname
	if !rw.cname && rw.qtype != qtype {
		return d // the name exists with other types: NODATA
	}
	if !strings.HasPrefix(rw.name, "*.") {
		d.Answer = rw.answers
		return d
	}
	dotted, _ := wire.Dotted(new([256]byte), qname)
	owner := dns.Fqdn(string(dotted))
	for _, a := range rw.answers {
		c := dns.Copy(a)
		c.Header().Name = owner
		d.Answer = append(d.Answer, c)
	}
	return d
}
