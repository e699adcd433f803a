package blocklist

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

var allFormats = []Format{FormatAuto, FormatHosts, FormatDomains, FormatAdblock, FormatRegex}

var outcomeNames = map[outcome]string{
	outSkip: "skip", outInvalid: "invalid", outUnsupported: "unsupported", outRules: "rules",
}

// TestCorpusGolden pins the verdict of every tricky line in every format,
// and the counts CompileSource reports for the whole corpus.
func TestCorpusGolden(t *testing.T) {
	body, err := os.ReadFile("testdata/corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, f := range allFormats {
		fmt.Fprintf(&out, "== format %s\n", f)
		p := lineParser{format: f}
		text := strings.TrimPrefix(string(body), "\ufeff")
		for line := range strings.Lines(text) {
			line = strings.TrimRight(line, "\r\n")
			o := p.parse(line)
			var rules []string
			for _, r := range p.rules {
				rules = append(rules, r.text())
			}
			shown := line
			if len(shown) > 60 {
				shown = shown[:60] + "..."
			}
			fmt.Fprintf(&out, "%-70s %-11s %s\n", strconv.Quote(shown), outcomeNames[o], strings.Join(rules, " "))
		}
		src, err := CompileSource(context.Background(), SourceSpec{Name: "corpus", Format: f}, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		st := src.Status()
		fmt.Fprintf(&out, "-- counts entries=%d invalid=%d unsupported=%d ruleCount=%d\n",
			st.Entries, st.Invalid, st.Unsupported, st.RuleCount)
	}
	golden := filepath.Join("testdata", "corpus.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(want, out.Bytes()) {
		t.Errorf("corpus verdicts differ from %s (run with -update and review the diff):\n%s", golden, out.String())
	}
}
