package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"

	"github.com/svcdns/svc/internal/validation"
)

// Output formats of -o.
const (
	outTable = "table"
	outWide  = "wide"
	outJSON  = "json"
	outYAML  = "yaml"
	outName  = "name"
)

func checkOutput(o string, allowed ...string) error {
	if len(allowed) == 0 {
		allowed = []string{outTable, outWide, outJSON, outYAML, outName}
	}
	for _, a := range allowed {
		if o == a {
			return nil
		}
	}
	return fmt.Errorf("--output %q: use one of %s", o, strings.Join(allowed, ", "))
}

// writeJSON prints v indented.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func writeYAML(w io.Writer, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Errorf("yaml: %w", err)
	}
	_, err = w.Write(b)
	return err
}

// writeData prints v as JSON or YAML per the output flag; false when the
// format is neither.
func writeData(w io.Writer, format string, v any) (bool, error) {
	switch format {
	case outJSON:
		return true, writeJSON(w, v)
	case outYAML:
		return true, writeYAML(w, v)
	}
	return false, nil
}

// listOf wraps objects in a List that `svc apply` accepts as is.
func listOf(items []map[string]any) map[string]any {
	l := make([]any, len(items))
	for i, it := range items {
		l[i] = it
	}
	return map[string]any{"apiVersion": "v1", "kind": "List", "items": l}
}

// printObjects prints objects of one kind in the chosen format.
func printObjects(w io.Writer, format string, ki validation.KindInfo, items []map[string]any, allNamespaces, single bool, now time.Time) error {
	switch format {
	case outJSON, outYAML:
		var v any = listOf(items)
		if single && len(items) == 1 {
			v = items[0]
		}
		_, err := writeData(w, format, v)
		return err
	case outName:
		for _, it := range items {
			fmt.Fprintf(w, "%s/%s\n", strings.ToLower(ki.Kind), nameOf(it))
		}
		return nil
	}
	return printTable(w, ki, items, allNamespaces && ki.Namespaced, format == outWide, now)
}

func nameOf(obj map[string]any) string {
	md, _ := obj["metadata"].(map[string]any)
	n, _ := md["name"].(string)
	return n
}

func namespaceOf(obj map[string]any) string {
	md, _ := obj["metadata"].(map[string]any)
	n, _ := md["namespace"].(string)
	return n
}

// printTable prints kubectl-like columns from the kind's printer columns.
func printTable(w io.Writer, ki validation.KindInfo, items []map[string]any, withNS, wide bool, now time.Time) error {
	var cols []validation.Column
	all := ki.Columns
	if len(all) == 0 {
		// kubectl shows AGE for kinds without printer columns.
		all = []validation.Column{{Name: "AGE", Type: "date", JSONPath: ".metadata.creationTimestamp"}}
	}
	for _, c := range all {
		if c.Priority == 0 || wide {
			cols = append(cols, c)
		}
	}
	// Why an object is not Ready (or is Degraded): a REASON column after
	// READY, and MESSAGE with -o wide, when any object has one.
	readyAt, whyShown := -1, false
	whys := make([]condWhy, len(items))
	for i, c := range cols {
		if strings.EqualFold(c.Name, "READY") {
			readyAt = i
		}
	}
	if readyAt >= 0 {
		for i, it := range items {
			whys[i] = whyNotReady(it)
			whyShown = whyShown || whys[i].reason != ""
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	var hdr []string
	if withNS {
		hdr = append(hdr, "NAMESPACE")
	}
	hdr = append(hdr, "NAME")
	for i, c := range cols {
		hdr = append(hdr, strings.ToUpper(c.Name))
		if i == readyAt && whyShown {
			hdr = append(hdr, "REASON")
			if wide {
				hdr = append(hdr, "MESSAGE")
			}
		}
	}
	fmt.Fprintln(tw, strings.Join(hdr, "\t"))
	for k, it := range items {
		var row []string
		if withNS {
			row = append(row, namespaceOf(it))
		}
		row = append(row, nameOf(it))
		for i, c := range cols {
			row = append(row, cellValue(it, c, now))
			if i == readyAt && whyShown {
				row = append(row, orNone(whys[k].reason))
				if wide {
					row = append(row, orNone(oneLine(whys[k].message)))
				}
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// condWhy is the reason and message of the condition that says why an
// object is not (fully) in effect.
type condWhy struct{ reason, message string }

// whyNotReady reads status.conditions: the Ready condition when it is not
// True, else a Degraded condition that is True; empty when all is well.
func whyNotReady(obj map[string]any) condWhy {
	st, _ := obj["status"].(map[string]any)
	conds, _ := st["conditions"].([]any)
	var degraded condWhy
	for _, c := range conds {
		m, _ := c.(map[string]any)
		typ, _ := m["type"].(string)
		status, _ := m["status"].(string)
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		switch {
		case typ == "Ready" && status != "True":
			return condWhy{reason: orNone(reason), message: msg}
		case typ == "Degraded" && status == "True":
			degraded = condWhy{reason: orNone(reason), message: msg}
		}
	}
	return degraded
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// oneLine keeps a message on its table row.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 160 {
		s = string(r[:157]) + "..."
	}
	return s
}

// cellValue evaluates a printer column's JSONPath like kubectl does.
func cellValue(obj map[string]any, c validation.Column, now time.Time) string {
	jp := jsonpath.New(c.Name).AllowMissingKeys(true)
	if err := jp.Parse("{" + c.JSONPath + "}"); err != nil {
		return "<invalid>"
	}
	res, err := jp.FindResults(obj)
	if err != nil || len(res) == 0 || len(res[0]) == 0 {
		return "<none>"
	}
	var parts []string
	for _, v := range res[0] {
		if !v.IsValid() || !v.CanInterface() {
			continue
		}
		parts = append(parts, formatCell(v.Interface(), c, now))
	}
	if len(parts) == 0 {
		return "<none>"
	}
	return strings.Join(parts, ",")
}

func formatCell(v any, c validation.Column, now time.Time) string {
	switch t := v.(type) {
	case nil:
		return "<none>"
	case string:
		if c.Type == "date" {
			if ts, err := time.Parse(time.RFC3339, t); err == nil {
				return humanAge(now.Sub(ts))
			}
		}
		return t
	case []any:
		s := make([]string, len(t))
		for i, x := range t {
			s[i] = formatCell(x, c, now)
		}
		return strings.Join(s, ",")
	case map[string]any:
		b, _ := json.Marshal(t)
		return string(b)
	case float64:
		if t == float64(int64(t)) {
			return fmt.Sprintf("%d", int64(t))
		}
		return fmt.Sprintf("%g", t)
	}
	return fmt.Sprint(v)
}

// humanAge is kubectl's AGE.
func humanAge(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return duration.HumanDuration(d)
}

// sortObjects orders by namespace then name.
func sortObjects(items []map[string]any) {
	sort.SliceStable(items, func(i, j int) bool {
		ni, nj := namespaceOf(items[i]), namespaceOf(items[j])
		if ni != nj {
			return ni < nj
		}
		return nameOf(items[i]) < nameOf(items[j])
	})
}

// toYAMLString renders v as YAML text for describe.
func toYAMLString(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(bytes.TrimRight(b, "\n"))
}

func sortStrings(s []string) { sort.Strings(s) }
