// Package blocklist parses block and allow lists (hosts, domains, adblock
// and regex formats) and compiles them into immutable lookup tables that
// the blocking stage matches query names against without allocating.
//
// The input types mirror the BlockList object of the interface spec so this
// package does not depend on the API package; the caller converts.
package blocklist

import "strings"

// AnnotationEnabled switches a whole BlockList off when set to "false".
const AnnotationEnabled = "service.io/enabled"

// EnabledByAnnotations reports whether a BlockList with these annotations is
// switched on: only the value "false" (any case) switches it off.
func EnabledByAnnotations(ann map[string]string) bool {
	v, ok := ann[AnnotationEnabled]
	return !ok || !strings.EqualFold(strings.TrimSpace(v), "false")
}

// Format of a source body.
type Format string

// Formats of the spec; the empty string means auto.
const (
	FormatAuto    Format = "auto"
	FormatHosts   Format = "hosts"
	FormatDomains Format = "domains"
	FormatAdblock Format = "adblock"
	FormatRegex   Format = "regex"
)

// Mode of a list: block lists block what they match, allow lists allow it.
type Mode string

// Modes of the spec; the empty string means block.
const (
	ModeBlock Mode = "block"
	ModeAllow Mode = "allow"
)

// EntryType of a structured entry.
type EntryType string

// Entry types of the spec; the empty string means exact.
const (
	EntryExact    EntryType = "exact"
	EntryWildcard EntryType = "wildcard"
	EntryRegex    EntryType = "regex"
)

// Entry is a structured entry of a source, compiled as an adblock rule:
// exact is |value^, wildcard (*.domain) blocks subdomains only, regex is
// /value/.
type Entry struct {
	Value   string
	Type    EntryType
	Enabled *bool // nil means true
}

// SourceSpec mirrors spec.sources[] minus where the body comes from (url,
// inline, configMapRef): the caller hands the body to CompileSource.
type SourceSpec struct {
	Name       string
	Format     Format
	Subdomains bool
	Enabled    *bool // nil means true
	Exclude    []string
	Entries    []Entry
}

// IsEnabled reports whether the source is switched on.
func (s SourceSpec) IsEnabled() bool { return s.Enabled == nil || *s.Enabled }

// ListSpec mirrors the parts of a BlockList the matcher needs.
type ListSpec struct {
	Name     string // namespace/name, for logs and decisions
	Mode     Mode
	Disabled bool // annotation service.io/enabled is "false"
}

// maxStaleExcludes caps status.sources[].staleExcludes (spec: at most 50).
const maxStaleExcludes = 50

// SourceStatus holds the parse counts of one source (spec status.sources[];
// the caller adds digest, etag, lastFetched and error from fetching).
type SourceStatus struct {
	Name string
	// Enabled is false when the source is switched off.
	Enabled bool
	// Entries counts rules applied (each name of a hosts line is one).
	Entries int
	// Invalid counts lines that are not rules of the format.
	Invalid int
	// Unsupported counts valid rules that are not applied: modifiers,
	// mid-pattern wildcards, URL rules, cosmetic rules, hosts rewrites.
	Unsupported int
	// Excluded counts rules switched off by exclude.
	Excluded int
	// StaleExcludes lists (sorted, at most 50) exclude values that matched
	// no rule.
	StaleExcludes []string
	// RuleCount counts distinct compiled rules (names after deduplication
	// plus regular expressions).
	RuleCount int
}

// ListStatus is the sum over a list's enabled sources.
type ListStatus struct {
	Entries     int
	Invalid     int
	Unsupported int
	RuleCount   int
}
