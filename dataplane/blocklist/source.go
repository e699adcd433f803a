package blocklist

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"unsafe"
)

// MaxLineBytes is the longest line a body may carry; longer lines are
// counted invalid and skipped.
const MaxLineBytes = 4096

// regexRule is a compiled /re/ rule; text is kept for RuleText.
type regexRule struct {
	re   *regexp.Regexp
	text string
}

// Source is the immutable compiled form of one source. A List is a slice of
// Sources, so a changed source is recompiled alone and the others shared.
type Source struct {
	name     string
	format   Format
	tab      *table
	blockRe  []regexRule
	exceptRe []regexRule
	status   SourceStatus
}

// Name of the source.
func (s *Source) Name() string { return s.name }

// Status returns the parse counts; the caller owns the returned slice.
func (s *Source) Status() SourceStatus {
	st := s.status
	st.StaleExcludes = slices.Clone(st.StaleExcludes)
	return st
}

// SizeBytes estimates the retained heap of the compiled tables.
func (s *Source) SizeBytes() int { return s.tab.sizeBytes() }

// DisabledSource is the placeholder of a switched-off source: it matches
// nothing and reports enabled false.
func DisabledSource(name string) *Source {
	return &Source{name: name, status: SourceStatus{Name: name}}
}

// CompileSource parses body (may be nil: entries only) in spec's format,
// applies exclude and the structured entries, and compiles the result. An
// error means the body could not be read or ctx ended; bad lines are only
// counted.
func CompileSource(ctx context.Context, spec SourceSpec, body io.Reader) (*Source, error) {
	if !spec.IsEnabled() {
		return DisabledSource(spec.Name), nil
	}
	format := spec.Format
	switch format {
	case "":
		format = FormatAuto
	case FormatAuto, FormatHosts, FormatDomains, FormatAdblock, FormatRegex:
	default:
		return nil, fmt.Errorf("source %q: unknown format %q", spec.Name, format)
	}
	c := compiler{
		src: &Source{name: spec.Name, format: format,
			status: SourceStatus{Name: spec.Name, Enabled: true}},
		p: lineParser{format: format, subdomains: spec.Subdomains},
	}
	if len(spec.Exclude) > 0 {
		c.exclude = make(map[string]bool, len(spec.Exclude))
		for _, e := range spec.Exclude {
			c.exclude[normExclude(e)] = false
		}
	}
	if body != nil {
		if err := c.readBody(ctx, body); err != nil {
			return nil, fmt.Errorf("source %q: %w", spec.Name, err)
		}
	}
	c.addEntries(spec.Entries)
	return c.finish(), nil
}

func normExclude(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "/") || strings.HasPrefix(s, "@@/") {
		return s
	}
	return strings.TrimSuffix(asciiLower(s), ".")
}

type compiler struct {
	src     *Source
	p       lineParser
	b       tableBuilder
	exclude map[string]bool // value -> used
}

func (c *compiler) readBody(ctx context.Context, body io.Reader) error {
	r := bufio.NewReaderSize(body, 64<<10)
	first := true
	for n := 0; ; n++ {
		if n&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// Very long line: invalid; skip the rest of it.
			c.src.status.Invalid++
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read body: %w", err)
			}
			continue
		}
		if len(line) > 0 {
			if first {
				line = trimBOM(line)
				first = false
			}
			if len(line) > MaxLineBytes {
				c.src.status.Invalid++
			} else {
				// The view is only used until the next ReadSlice; the
				// builder copies names.
				c.line(unsafe.String(unsafe.SliceData(line), len(line)))
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read body: %w", err)
		}
	}
}

func trimBOM(b []byte) []byte {
	if len(b) >= 3 && b[0] == 0xef && b[1] == 0xbb && b[2] == 0xbf {
		return b[3:]
	}
	return b
}

func (c *compiler) line(line string) {
	st := &c.src.status
	switch c.p.parse(line) {
	case outInvalid:
		st.Invalid++
	case outUnsupported:
		st.Unsupported++
	case outRules:
		st.Invalid += c.p.extraInvalid
		st.Unsupported += c.p.extraUnsupported
		for _, r := range c.p.rules {
			if c.exclude != nil {
				t := r.text()
				if _, ok := c.exclude[t]; ok {
					c.exclude[t] = true
					st.Excluded++
					continue
				}
			}
			c.add(r)
		}
	}
}

func (c *compiler) add(r rule) {
	c.src.status.Entries++
	if r.flags == 0 {
		rr := regexRule{re: regexp.MustCompile("(?i)" + r.re), text: r.text()}
		if r.exc {
			c.src.exceptRe = append(c.src.exceptRe, rr)
		} else {
			c.src.blockRe = append(c.src.blockRe, rr)
		}
		return
	}
	f := r.flags
	if r.plain {
		f |= flagPlain
	}
	c.b.add(r.name, f)
}

// addEntries compiles structured entries as adblock rules. Exclude does not
// apply to them: they carry their own enabled switch.
func (c *compiler) addEntries(entries []Entry) {
	for _, e := range entries {
		if e.Enabled != nil && !*e.Enabled {
			continue
		}
		r, ok := entryRule(e)
		if !ok {
			c.src.status.Invalid++
			continue
		}
		c.add(r)
	}
}

func entryRule(e Entry) (rule, bool) {
	v := strings.TrimSpace(e.Value)
	switch e.Type {
	case "", EntryExact:
		n, ok := normName(v)
		return rule{name: strings.Clone(n), flags: flagExact}, ok
	case EntryWildcard:
		rest, ok := strings.CutPrefix(v, "*.")
		if !ok {
			return rule{}, false
		}
		n, ok := normName(rest)
		return rule{name: strings.Clone(n), flags: flagWild}, ok
	case EntryRegex:
		if v == "" || !validRegex(v) {
			return rule{}, false
		}
		return rule{re: v}, true
	}
	return rule{}, false
}

func validRegex(re string) bool {
	_, err := regexp.Compile("(?i)" + re)
	return err == nil
}

func (c *compiler) finish() *Source {
	s := c.src
	s.tab = c.b.build()
	s.status.RuleCount = len(s.blockRe) + len(s.exceptRe)
	if s.tab != nil {
		s.status.RuleCount += s.tab.n
	}
	for v, used := range c.exclude {
		if !used {
			s.status.StaleExcludes = append(s.status.StaleExcludes, v)
		}
	}
	slices.Sort(s.status.StaleExcludes)
	if len(s.status.StaleExcludes) > maxStaleExcludes {
		s.status.StaleExcludes = s.status.StaleExcludes[:maxStaleExcludes]
	}
	return s
}

// NormalizeRules parses body in format and returns each applied rule as the
// source format writes it (the texts exclude values are compared with).
// Off the hot path: for the entries route and for tests.
func NormalizeRules(format Format, subdomains bool, body string) []string {
	p := lineParser{format: format, subdomains: subdomains}
	if p.format == "" {
		p.format = FormatAuto
	}
	var out []string
	for line := range strings.Lines(strings.TrimPrefix(body, "\ufeff")) {
		if p.parse(strings.TrimRight(line, "\r\n")) != outRules {
			continue
		}
		for _, r := range p.rules {
			out = append(out, strings.Clone(r.text()))
		}
	}
	return out
}
