// Package manifest decodes object manifests as people write them: multi-document
// YAML, a JSON object, a JSON array, or a List (`kind: List` or `<Kind>List`)
// of objects, into unstructured objects of service.io/v1alpha1. Errors name the
// source, the document (and item), the line when known, and the field.
package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// APIVersion is the only apiVersion of stored objects.
const APIVersion = "service.io/v1alpha1"

// MaxBytes bounds one manifest source.
const MaxBytes = 32 << 20

// maxNodes bounds the YAML nodes one source may expand to (aliases included),
// so that a small file cannot expand into a huge object.
const maxNodes = 4 << 20

// Error is one problem of a manifest.
type Error struct {
	Source   string // file path or other name of the input
	Document int    // 1-based YAML document; 0 for the whole source
	Item     int    // 1-based item of a JSON array or List; 0 when none
	Line     int    // 1-based line; 0 when unknown
	Field    string // field path, e.g. "apiVersion" or "metadata.name"
	Message  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Document > 0 {
		fmt.Fprintf(&b, ": document %d", e.Document)
	}
	if e.Item > 0 {
		fmt.Fprintf(&b, " item %d", e.Item)
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", e.Line)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": %s", e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	return b.String()
}

// Errors is every problem found in one source.
type Errors []*Error

func (es Errors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// Object is one decoded object and where it came from.
type Object struct {
	*unstructured.Unstructured
	Document int // 1-based
	Item     int // 1-based item in an array or List; 0 when none
	Line     int
}

// DecodeReader reads at most MaxBytes from r and decodes them.
func DecodeReader(source string, r io.Reader) ([]Object, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return nil, Errors{{Source: source, Message: fmt.Sprintf("read: %v", err)}}
	}
	return Decode(source, data)
}

// Decode decodes every object of data. It returns every problem it finds as
// Errors, together with the objects that were fine.
func Decode(source string, data []byte) ([]Object, error) {
	if len(data) > MaxBytes {
		return nil, Errors{{Source: source, Message: fmt.Sprintf("larger than %d bytes", MaxBytes)}}
	}
	d := &decoder{source: source, budget: maxNodes}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []Object
	for doc := 1; ; doc++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// The YAML parser cannot go on after a syntax error.
			d.add(&Error{Source: source, Document: doc, Line: yamlErrorLine(err), Message: "malformed YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")})
			break
		}
		out = append(out, d.document(doc, &n)...)
		if d.budget <= 0 {
			break
		}
	}
	if len(d.errs) > 0 {
		return out, d.errs
	}
	return out, nil
}

// FromMaps checks objects given as maps (e.g. the inline `objects` setting);
// item numbers are 1-based positions in objs.
func FromMaps(source string, objs []map[string]any) ([]Object, error) {
	d := &decoder{source: source}
	var out []Object
	for i, m := range objs {
		b, err := json.Marshal(m)
		if err != nil {
			d.add(&Error{Source: source, Item: i + 1, Message: fmt.Sprintf("not a JSON object: %v", err)})
			continue
		}
		var norm map[string]any
		if err := json.Unmarshal(b, &norm); err != nil || norm == nil {
			d.add(&Error{Source: source, Item: i + 1, Message: "not a JSON object"})
			continue
		}
		if e := check(norm); e != nil {
			e.Source, e.Item = source, i+1
			d.add(e)
			continue
		}
		// UnmarshalJSON turns whole numbers into int64 as the store expects.
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(b); err != nil {
			d.add(&Error{Source: source, Item: i + 1, Message: err.Error()})
			continue
		}
		out = append(out, Object{Unstructured: u, Item: i + 1})
	}
	if len(d.errs) > 0 {
		return out, d.errs
	}
	return out, nil
}

type decoder struct {
	source string
	errs   Errors
	budget int
}

func (d *decoder) add(e *Error) { d.errs = append(d.errs, e) }

func (d *decoder) document(doc int, n *yaml.Node) []Object {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		n = n.Content[0]
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil // an empty document, e.g. after a trailing ---
	}
	v, err := d.value(n, 0)
	if err != nil {
		err.Source, err.Document = d.source, doc
		d.add(err)
		return nil
	}
	switch t := v.(type) {
	case []any:
		return d.items(doc, n, t)
	case map[string]any:
		kind, _ := t["kind"].(string)
		if items, ok := t["items"].([]any); ok && (kind == "List" || strings.HasSuffix(kind, "List")) {
			itemsNode := mapValue(n, "items")
			return d.items(doc, itemsNode, items)
		}
		if e := check(t); e != nil {
			e.Source, e.Document = d.source, doc
			e.Line = fieldLine(n, e.Field)
			d.add(e)
			return nil
		}
		return []Object{{Unstructured: &unstructured.Unstructured{Object: t}, Document: doc, Line: n.Line}}
	default:
		d.add(&Error{Source: d.source, Document: doc, Line: n.Line, Message: "not an object, an array or a List"})
		return nil
	}
}

func (d *decoder) items(doc int, seq *yaml.Node, items []any) []Object {
	var out []Object
	for i, it := range items {
		var node *yaml.Node
		line := 0
		if seq != nil && seq.Kind == yaml.SequenceNode && i < len(seq.Content) {
			node = seq.Content[i]
			line = node.Line
		}
		m, ok := it.(map[string]any)
		if !ok {
			d.add(&Error{Source: d.source, Document: doc, Item: i + 1, Line: line, Message: "not an object"})
			continue
		}
		if e := check(m); e != nil {
			e.Source, e.Document, e.Item = d.source, doc, i+1
			e.Line = line
			if node != nil {
				if l := fieldLine(node, e.Field); l > 0 {
					e.Line = l
				}
			}
			d.add(e)
			continue
		}
		out = append(out, Object{Unstructured: &unstructured.Unstructured{Object: m}, Document: doc, Item: i + 1, Line: line})
	}
	return out
}

// check returns the first problem of an object's identity fields.
func check(m map[string]any) *Error {
	av, ok := m["apiVersion"]
	if !ok || av == "" {
		return &Error{Field: "apiVersion", Message: "required"}
	}
	if s, _ := av.(string); s != APIVersion {
		return &Error{Field: "apiVersion", Message: fmt.Sprintf("must be %s, got %v", APIVersion, av)}
	}
	kind, ok := m["kind"].(string)
	if !ok || kind == "" {
		return &Error{Field: "kind", Message: "required"}
	}
	md, ok := m["metadata"].(map[string]any)
	if !ok {
		return &Error{Field: "metadata", Message: "required"}
	}
	if name, _ := md["name"].(string); name == "" {
		return &Error{Field: "metadata.name", Message: "required"}
	}
	for _, f := range []string{"namespace"} {
		if v, ok := md[f]; ok {
			if _, ok := v.(string); !ok {
				return &Error{Field: "metadata." + f, Message: "must be a string"}
			}
		}
	}
	for _, f := range []string{"labels", "annotations"} {
		v, ok := md[f]
		if !ok || v == nil {
			continue
		}
		mm, ok := v.(map[string]any)
		if !ok {
			return &Error{Field: "metadata." + f, Message: "must be a map of strings"}
		}
		for k, vv := range mm {
			if _, ok := vv.(string); !ok {
				return &Error{Field: "metadata." + f + "." + k, Message: "must be a string"}
			}
		}
	}
	return nil
}

// value converts a YAML node into JSON-compatible values (maps with string
// keys, []any, string, int64, float64, bool, nil).
func (d *decoder) value(n *yaml.Node, depth int) (any, *Error) {
	d.budget--
	if d.budget < 0 {
		return nil, &Error{Line: n.Line, Message: "document too large or too deeply aliased"}
	}
	if depth > 1000 {
		return nil, &Error{Line: n.Line, Message: "nested too deeply"}
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return d.value(n.Content[0], depth+1)
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, &Error{Line: n.Line, Message: "unknown alias"}
		}
		return d.value(n.Alias, depth+1)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := d.value(c, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.Value == "<<" && k.ShortTag() == "!!merge" {
				return nil, &Error{Line: k.Line, Message: "merge keys (<<) are not supported"}
			}
			if k.Kind != yaml.ScalarNode {
				return nil, &Error{Line: k.Line, Message: "map keys must be strings"}
			}
			if _, dup := out[k.Value]; dup {
				return nil, &Error{Line: k.Line, Field: k.Value, Message: "duplicate key"}
			}
			val, err := d.value(v, depth+1)
			if err != nil {
				if err.Field == "" {
					err.Field = k.Value
				} else {
					err.Field = k.Value + "." + err.Field
				}
				return nil, err
			}
			out[k.Value] = val
		}
		return out, nil
	case yaml.ScalarNode:
		return scalar(n)
	}
	return nil, &Error{Line: n.Line, Message: "unsupported YAML node"}
}

func scalar(n *yaml.Node) (any, *Error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, &Error{Line: n.Line, Message: err.Error()}
		}
		return b, nil
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			return nil, &Error{Line: n.Line, Message: fmt.Sprintf("integer %s out of range", n.Value)}
		}
		return i, nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, &Error{Line: n.Line, Message: err.Error()}
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, &Error{Line: n.Line, Message: fmt.Sprintf("%s is not a JSON number", n.Value)}
		}
		return f, nil
	default: // strings, timestamps and binary stay as written
		return n.Value, nil
	}
}

// mapValue returns the value node of key in a mapping node.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// fieldLine returns the line of a dotted field path in a mapping node, or of
// its deepest present parent, or of the node itself.
func fieldLine(n *yaml.Node, field string) int {
	line := n.Line
	cur := n
	for part := range strings.SplitSeq(field, ".") {
		if part == "" || cur == nil || cur.Kind != yaml.MappingNode {
			break
		}
		found := false
		for i := 0; i+1 < len(cur.Content); i += 2 {
			if cur.Content[i].Value == part {
				line = cur.Content[i].Line
				cur = cur.Content[i+1]
				found = true
				break
			}
		}
		if !found {
			break
		}
	}
	return line
}

// yamlErrorLine extracts "line N" from a yaml.v3 error message.
func yamlErrorLine(err error) int {
	msg := err.Error()
	i := strings.Index(msg, "line ")
	if i < 0 {
		return 0
	}
	j := i + len("line ")
	k := j
	for k < len(msg) && msg[k] >= '0' && msg[k] <= '9' {
		k++
	}
	l, _ := strconv.Atoi(msg[j:k])
	return l
}
