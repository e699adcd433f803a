package blocklist

import (
	"fmt"
	"slices"
	"unsafe"
)

// List is one compiled BlockList: its sources combined. It is immutable and
// safe for concurrent use; Replace builds a new List sharing the unchanged
// sources, which the caller publishes with an atomic pointer swap.
type List struct {
	spec    ListSpec
	sources []*Source
	hasRe   bool
	cache   *matchCache // recent verdicts of a large list (matchcache.go)
}

// NewList combines compiled sources (nil entries are skipped).
func NewList(spec ListSpec, sources []*Source) *List {
	if spec.Mode == "" {
		spec.Mode = ModeBlock
	}
	l := &List{spec: spec}
	for _, s := range sources {
		if s != nil {
			l.sources = append(l.sources, s)
		}
	}
	l.index()
	return l
}

func (l *List) index() {
	l.hasRe = false
	for _, s := range l.sources {
		if len(s.blockRe) > 0 || len(s.exceptRe) > 0 {
			l.hasRe = true
		}
	}
	l.cache = nil
	if !l.spec.Disabled && l.SizeBytes() >= cacheMinBytes {
		l.cache = newMatchCache()
	}
}

// Replace returns a new List with the source of the same name replaced (or
// appended). The receiver is unchanged and may still be serving queries.
func (l *List) Replace(s *Source) *List {
	n := &List{spec: l.spec, sources: slices.Clone(l.sources)}
	i := slices.IndexFunc(n.sources, func(o *Source) bool { return o.name == s.name })
	if i < 0 {
		n.sources = append(n.sources, s)
	} else {
		n.sources[i] = s
	}
	n.index()
	return n
}

// Source returns the compiled source called name, for reuse when the list
// spec changes but a source's body did not.
func (l *List) Source(name string) *Source {
	for _, s := range l.sources {
		if s.name == name {
			return s
		}
	}
	return nil
}

// Spec returns the list's spec.
func (l *List) Spec() ListSpec { return l.spec }

// Status sums the counts of the enabled sources.
func (l *List) Status() ListStatus {
	var st ListStatus
	for _, s := range l.sources {
		st.Entries += s.status.Entries
		st.Invalid += s.status.Invalid
		st.Unsupported += s.status.Unsupported
		st.RuleCount += s.status.RuleCount
	}
	return st
}

// SizeBytes estimates the retained heap of the list's tables and its
// verdict table.
func (l *List) SizeBytes() int {
	n := 0
	for _, s := range l.sources {
		n += s.SizeBytes()
	}
	if l.cache != nil {
		n += int(unsafe.Sizeof(cacheSet{})) * len(l.cache.sets)
	}
	return n
}

// RuleID identifies the rule that decided a match; List.RuleText turns it
// into text.
type RuleID struct {
	kind  uint8  // a table flag, or kindBlockRe / kindExceptRe
	plain bool   // the name rule was a hosts or plain-domain line
	off   uint32 // record offset or regex index
}

const (
	kindBlockRe  uint8 = 0x40
	kindExceptRe uint8 = 0x80
)

// Match is the verdict of one list for one name.
type Match struct {
	// Matched: the name is on the list (blocked by a block list, allowed by
	// an allow list).
	Matched bool
	// Exception: a rule matched but an @@ exception of the same list
	// overrode it; Matched is then false.
	Exception bool
	// Source indexes the list's sources (for SourceName); -1 when nothing
	// matched.
	Source int
	// Rule is the deciding rule: the block rule when Matched, the exception
	// when Exception.
	Rule RuleID
	// Whole: the rule's name (RuleParts' name) is the name asked, lower
	// case, without the trailing dot; a caller that has that name need not
	// read the rule's record for it (NameRule).
	Whole bool
}

// Match reports whether name is on the list. name is a query name in
// presentation form (no escapes), any case, with or without one trailing
// dot. It does not allocate.
//
// One right-to-left pass hashes the name incrementally; at each label
// boundary the suffix to its right is probed in every source, so no
// per-suffix state is stored. The deciding rule is the one a (source, then
// shortest suffix first) order finds first.
func (l *List) Match(name string) Match {
	none := Match{Source: -1}
	if l == nil || l.spec.Disabled || len(l.sources) == 0 {
		return none
	}
	if len(name) > 0 && name[len(name)-1] == '.' {
		name = name[:len(name)-1]
	}
	if len(name) == 0 || len(name) > maxName {
		return none
	}
	if c := l.cache; c != nil {
		k := cacheKeyString(name)
		if m, ok := c.get(k); ok {
			return m
		}
		m := l.match(name)
		c.put(k, m)
		return m
	}
	return l.match(name)
}

// match is Match without the verdict table, for a name Match checked.
func (l *List) match(name string) Match {
	none := Match{Source: -1}
	block, exc := none, none
	h := uint64(fnvOffset)
	for i := len(name) - 1; i >= 0; i-- {
		c := name[i]
		if c == '.' {
			// Most suffixes are on no list: the filter test, inlined here,
			// spares them the probe's calls.
			if hm := mix(h); l.mayHave(hm) {
				l.probe(name[i+1:], hm, false, &block, &exc)
			}
		}
		h = (h ^ uint64(lowerTab[c])) * fnvPrime
	}
	if hm := mix(h); l.mayHave(hm) {
		l.probe(name, hm, true, &block, &exc)
	}
	if l.hasRe {
		if !block.Matched && !exc.Exception {
			block = l.matchRe(name, false)
		}
		if block.Matched && !exc.Exception {
			exc = l.matchRe(name, true)
		}
	}
	if exc.Exception && block.Matched {
		return exc
	}
	return block
}

// mayHave reports whether the filter of some source lets hash h through.
func (l *List) mayHave(h uint64) bool {
	for _, s := range l.sources {
		if t := s.tab; t != nil && t.mayHave(h) {
			return true
		}
	}
	return false
}

// probe looks suffix (hash h; self: it is the whole query name) up in every
// source, keeping the first block and exception in source order.
func (l *List) probe(suffix string, h uint64, self bool, block, exc *Match) {
	for si, s := range l.sources {
		if s.tab == nil {
			continue
		}
		f, off := s.tab.lookup(suffix, h)
		if f == 0 {
			continue
		}
		var b, e uint8
		if self {
			b, e = f&blockSelf, f&exSelf
		} else {
			b, e = f&blockBelow, f&exBelow
		}
		// Suffixes are probed shortest first, so for one source the first
		// hit wins; a lower source index beats a later hit of a higher one.
		if b != 0 && (!block.Matched || si < block.Source) {
			*block = Match{Matched: true, Source: si, Rule: RuleID{kind: lowestBit(b), plain: f&flagPlain != 0, off: off}, Whole: self}
		}
		if e != 0 && (!exc.Exception || si < exc.Source) {
			*exc = Match{Exception: true, Source: si, Rule: RuleID{kind: lowestBit(e), off: off}, Whole: self}
		}
	}
}

// MatchBytes is Match for a name held in a byte slice (not retained).
func (l *List) MatchBytes(name []byte) Match {
	return l.Match(unsafe.String(unsafe.SliceData(name), len(name)))
}

func lowestBit(f uint8) uint8 { return f & -f }

func (l *List) matchRe(name string, exception bool) Match {
	for si, s := range l.sources {
		rs := s.blockRe
		kind := kindBlockRe
		if exception {
			rs, kind = s.exceptRe, kindExceptRe
		}
		for i := range rs {
			if rs[i].re.MatchString(name) {
				return Match{Matched: !exception, Exception: exception, Source: si,
					Rule: RuleID{kind: kind, off: uint32(i)}}
			}
		}
	}
	return Match{Source: -1}
}

// SourceName names the source that decided m ("" when none).
func (l *List) SourceName(m Match) string {
	if m.Source < 0 || m.Source >= len(l.sources) {
		return ""
	}
	return l.sources[m.Source].name
}

// RuleText renders the rule that decided m, normalised as its source format
// writes it (hosts lines render as the bare name). It allocates for
// adblock rules; the DNS path takes RuleParts instead.
func (l *List) RuleText(m Match) string { return joinRule(l.RuleParts(m)) }

// RuleParts is RuleText in three parts that allocate nothing: the rule's
// name (stored in the list's table) and the constant text around it in
// adblock syntax ("||" and "^" for ||name^), so that a blocked answer and
// its log record carry the rule without building its text (issue #27:
// no allocation per query on the fast path).
func (l *List) RuleParts(m Match) (pre, name, post string) {
	if m.Source < 0 || m.Source >= len(l.sources) {
		return "", "", ""
	}
	s := l.sources[m.Source]
	switch m.Rule.kind {
	case kindBlockRe:
		return "", s.blockRe[m.Rule.off].text, ""
	case kindExceptRe:
		return "", s.exceptRe[m.Rule.off].text, ""
	case 0:
		return "", "", ""
	}
	name = s.tab.nameAt(m.Rule.off)
	pre, post = ruleAffixes(m.Rule.kind, m.Rule.plain)
	return pre, name, post
}

// NameRule reports whether m's rule is a name of a table whose text is
// the name asked (m.Whole), and returns the constant text around it as
// RuleParts does: RuleParts without reading the rule's record.
func (l *List) NameRule(m Match) (pre, post string, ok bool) {
	if !m.Whole || m.Source < 0 || m.Source >= len(l.sources) {
		return "", "", false
	}
	switch m.Rule.kind {
	case 0, kindBlockRe, kindExceptRe:
		return "", "", false
	}
	pre, post = ruleAffixes(m.Rule.kind, m.Rule.plain)
	return pre, post, true
}

// String is for logs.
func (l *List) String() string {
	return fmt.Sprintf("%s (%s, %d sources)", l.spec.Name, l.spec.Mode, len(l.sources))
}

// Verdict of a set of lists for one name.
type Verdict uint8

// Verdicts.
const (
	VerdictNone      Verdict = iota // on no list
	VerdictAllowed                  // on an allow list: allow lists win
	VerdictBlocked                  // on a block list
	VerdictNotOnList                // allowOnly and on no allow list
)

// Decision is what Decide concluded.
type Decision struct {
	Verdict Verdict
	// List indexes the lists argument (-1 for VerdictNone/NotOnList).
	List  int
	Match Match
}

// Decide applies a policy's lists to name: a match on any allow-mode list
// allows it (allow lists beat block lists); otherwise with allowOnly the
// name is refused; otherwise the first block-mode list that matches blocks
// it. A list's own mode decides its role. It does not allocate.
func Decide(name string, lists []*List, allowOnly bool) Decision {
	for i, l := range lists {
		if l == nil || l.spec.Mode != ModeAllow {
			continue
		}
		if m := l.Match(name); m.Matched {
			return Decision{Verdict: VerdictAllowed, List: i, Match: m}
		}
	}
	if allowOnly {
		return Decision{Verdict: VerdictNotOnList, List: -1, Match: Match{Source: -1}}
	}
	for i, l := range lists {
		if l == nil || l.spec.Mode == ModeAllow {
			continue
		}
		if m := l.Match(name); m.Matched {
			return Decision{Verdict: VerdictBlocked, List: i, Match: m}
		}
	}
	return Decision{Verdict: VerdictNone, List: -1, Match: Match{Source: -1}}
}
