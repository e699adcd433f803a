package guide_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// guidePath is the admin guide, relative to this package.
var guidePath = filepath.Join("..", "..", "docs", "admin-guide.md")

// check is a command only the test runs after a step, and what its output
// must (or, with negate, must not) match.
type check struct {
	cmd    string
	re     *regexp.Regexp
	negate bool
}

// step is one marked sh block of the guide (see the guide's header comment).
type step struct {
	name    string
	line    int
	script  string
	expect  []*regexp.Regexp
	reject  []*regexp.Regexp
	checks  []check
	tty     []string
	machine string
	byTest  string
}

// guide is the parsed admin guide: the vars block and the steps in order.
type guide struct {
	vars     string
	varNames map[string]string // name -> value as written
	steps    []step
}

var (
	commentRE = regexp.MustCompile(`(?s)<!--(.*?)-->`)
	varLineRE = regexp.MustCompile(`^([A-Z_][A-Z0-9_]*)=(.*)$`)
	varUseRE  = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)
)

func readGuide(t *testing.T) *guide {
	t.Helper()
	b, err := os.ReadFile(guidePath)
	if err != nil {
		t.Fatal(err)
	}
	g, err := parseGuide(string(b))
	if err != nil {
		t.Fatalf("%s: %v", guidePath, err)
	}
	return g
}

// parseGuide finds the vars block and every step. A marker must be followed
// (after blank lines only) by a ```sh block.
func parseGuide(text string) (*guide, error) {
	g := &guide{varNames: map[string]string{}}
	seen := map[string]bool{}
	for _, m := range commentRE.FindAllStringSubmatchIndex(text, -1) {
		body := strings.TrimSpace(text[m[2]:m[3]])
		line := strings.Count(text[:m[0]], "\n") + 1
		isVars := body == "vars"
		if !isVars && !strings.HasPrefix(body, "step:") {
			continue
		}
		rest := strings.TrimLeft(text[m[1]:], " \t\n")
		if !strings.HasPrefix(rest, "```sh\n") {
			return nil, fmt.Errorf("line %d: the marker %q is not followed by a ```sh block", line, firstLine(body))
		}
		script, _, ok := strings.Cut(strings.TrimPrefix(rest, "```sh\n"), "```")
		if !ok {
			return nil, fmt.Errorf("line %d: unterminated ```sh block", line)
		}
		if isVars {
			if g.vars != "" {
				return nil, fmt.Errorf("line %d: a second vars block", line)
			}
			g.vars = script
			for _, l := range strings.Split(script, "\n") {
				if vm := varLineRE.FindStringSubmatch(strings.TrimSpace(l)); vm != nil {
					g.varNames[vm[1]] = vm[2]
				}
			}
			continue
		}
		s, err := parseMarker(body, line)
		if err != nil {
			return nil, err
		}
		if seen[s.name] {
			return nil, fmt.Errorf("line %d: step %q marked twice", line, s.name)
		}
		seen[s.name] = true
		s.script = script
		g.steps = append(g.steps, s)
	}
	if g.vars == "" {
		return nil, fmt.Errorf("no vars block (an HTML comment \"vars\" before a ```sh block)")
	}
	if len(g.steps) == 0 {
		return nil, fmt.Errorf("no steps")
	}
	return g, nil
}

func parseMarker(body string, line int) (step, error) {
	lines := strings.Split(body, "\n")
	s := step{name: strings.TrimSpace(strings.TrimPrefix(lines[0], "step:")), line: line}
	if s.name == "" {
		return s, fmt.Errorf("line %d: step without a name", line)
	}
	for _, l := range lines[1:] {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		key, val, ok := strings.Cut(l, ":")
		val = strings.TrimSpace(val)
		if !ok {
			return s, fmt.Errorf("line %d, step %s: %q is not KEY: VALUE", line, s.name, l)
		}
		switch key {
		case "expect", "reject":
			re, err := regexp.Compile("(?m)" + val)
			if err != nil {
				return s, fmt.Errorf("line %d, step %s: %s: %v", line, s.name, key, err)
			}
			if key == "expect" {
				s.expect = append(s.expect, re)
			} else {
				s.reject = append(s.reject, re)
			}
		case "check":
			c, err := parseCheck(val)
			if err != nil {
				return s, fmt.Errorf("line %d, step %s: %v", line, s.name, err)
			}
			s.checks = append(s.checks, c)
		case "tty":
			for _, in := range strings.Split(val, "|") {
				s.tty = append(s.tty, strings.TrimSpace(in))
			}
		case "machine":
			if val != "new" {
				return s, fmt.Errorf("line %d, step %s: machine %q: only \"new\" is known", line, s.name, val)
			}
			s.machine = val
		case "by-test":
			s.byTest = val
		default:
			return s, fmt.Errorf("line %d, step %s: unknown key %q (expect, reject, check, tty, machine, by-test)", line, s.name, key)
		}
	}
	return s, nil
}

func parseCheck(val string) (check, error) {
	c := check{}
	cmd, re, ok := strings.Cut(val, " =!> ")
	if ok {
		c.negate = true
	} else if cmd, re, ok = strings.Cut(val, " => "); !ok {
		return c, fmt.Errorf("check %q: want CMD => REGEX or CMD =!> REGEX", val)
	}
	r, err := regexp.Compile("(?m)" + strings.TrimSpace(re))
	if err != nil {
		return c, fmt.Errorf("check %q: %v", val, err)
	}
	c.cmd, c.re = strings.TrimSpace(cmd), r
	return c, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// varsWith returns the vars block with each overridden NAME=... line
// replaced by NAME='value'. Names the block does not define are an error:
// the test would be setting something the guide never uses.
func (g *guide) varsWith(over map[string]string) (string, error) {
	var missing []string
	for k := range over {
		if _, ok := g.varNames[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return "", fmt.Errorf("the test overrides %v, which the guide's vars block does not define", missing)
	}
	var out []string
	for _, l := range strings.Split(g.vars, "\n") {
		if m := varLineRE.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			if v, ok := over[m[1]]; ok {
				l = m[1] + "=" + shellQuote(v)
			}
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n"), nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// undefinedVars lists the $NAMEs the steps use that the vars block does not
// define (HOME and the test's tty values excepted).
func (g *guide) undefinedVars() []string {
	known := map[string]bool{"HOME": true, "GENERATED_PASSWORD": true, "NEW_PASSWORD": true}
	var bad []string
	seen := map[string]bool{}
	for _, s := range g.steps {
		texts := []string{s.script, strings.Join(s.tty, " ")}
		for _, c := range s.checks {
			texts = append(texts, c.cmd)
		}
		for _, txt := range texts {
			for _, m := range varUseRE.FindAllStringSubmatch(txt, -1) {
				if n := m[1]; !known[n] && g.varNames[n] == "" && !seen[n] {
					seen[n] = true
					bad = append(bad, fmt.Sprintf("%s (step %s)", n, s.name))
				}
			}
		}
	}
	return bad
}

// TestGuideMarkers checks the guide's markers without running anything:
// every step is known to the test, every variable is defined, and the
// parser refuses what would make a step silently not run.
func TestGuideMarkers(t *testing.T) {
	g := readGuide(t)
	if bad := g.undefinedVars(); len(bad) > 0 {
		t.Errorf("variables used but not defined in the vars block: %v", bad)
	}
	var names []string
	for _, s := range g.steps {
		names = append(names, s.name)
		if s.byTest != "" {
			if _, ok := byTestSteps[s.name]; !ok {
				t.Errorf("step %s (line %d) is by-test but the test has no code for it", s.name, s.line)
			}
		} else if _, ok := byTestSteps[s.name]; ok {
			t.Errorf("step %s (line %d): the test has by-test code for it but the guide does not say by-test", s.name, s.line)
		}
		if s.byTest == "" && len(s.expect)+len(s.reject)+len(s.checks) == 0 {
			t.Errorf("step %s (line %d) asserts nothing: add expect, reject or check", s.name, s.line)
		}
	}
	for _, want := range []string{"install", "start", "login", "doctor", "upstreams", "add-list", "kids", "kids-ads",
		"safesearch", "pause", "resume", "deny", "allow", "local-names", "backup", "new-machine", "restore", "restore-same", "upgrade"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("the guide has no step %q (the issue's getting-started story needs it); steps: %v", want, names)
		}
	}
	for name, text := range map[string]string{
		"marker without block":  "<!-- step: x\nexpect: y\n-->\ntext\n",
		"unknown key":           "<!-- vars -->\n```sh\nA=1\n```\n<!-- step: x\nexpct: y\n-->\n```sh\ntrue\n```\n",
		"bad regexp":            "<!-- vars -->\n```sh\nA=1\n```\n<!-- step: x\nexpect: (\n-->\n```sh\ntrue\n```\n",
		"check without arrow":   "<!-- vars -->\n```sh\nA=1\n```\n<!-- step: x\ncheck: dig x\n-->\n```sh\ntrue\n```\n",
		"duplicate step":        "<!-- vars -->\n```sh\nA=1\n```\n<!-- step: x\n-->\n```sh\ntrue\n```\n<!-- step: x\n-->\n```sh\ntrue\n```\n",
		"no vars":               "<!-- step: x\n-->\n```sh\ntrue\n```\n",
		"unknown machine value": "<!-- vars -->\n```sh\nA=1\n```\n<!-- step: x\nmachine: old\n-->\n```sh\ntrue\n```\n",
	} {
		if _, err := parseGuide(text); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}
