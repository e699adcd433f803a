package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// goldenView is what a golden file records of one decode.
type goldenView struct {
	Objects []goldenObject `json:"objects"`
	Errors  []string       `json:"errors"`
}

type goldenObject struct {
	Document int            `json:"document"`
	Item     int            `json:"item,omitempty"`
	Line     int            `json:"line"`
	Object   map[string]any `json:"object"`
}

func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/in/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := Decode(filepath.Base(f), data)
			view := goldenView{Objects: []goldenObject{}, Errors: []string{}}
			for _, o := range objs {
				view.Objects = append(view.Objects, goldenObject{Document: o.Document, Item: o.Item, Line: o.Line, Object: o.Object})
			}
			if err != nil {
				var es Errors
				if !errors.As(err, &es) {
					t.Fatalf("error %T is not Errors", err)
				}
				for _, e := range es {
					view.Errors = append(view.Errors, e.Error())
				}
			}
			got, _ := json.MarshalIndent(view, "", "  ")
			got = append(got, '\n')
			golden := filepath.Join("testdata/golden", strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))+".json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("decode differs from %s (run with -update after checking):\n%s", golden, got)
			}
		})
	}
}

func TestErrorsNameSourceDocumentLineField(t *testing.T) {
	cases := []struct {
		name, in string
		want     Error
	}{
		{"wrong apiVersion", "apiVersion: v1\nkind: DNSZone\nmetadata: {name: x}\n",
			Error{Source: "s.yaml", Document: 1, Line: 1, Field: "apiVersion"}},
		{"missing kind in second document", "apiVersion: service.io/v1alpha1\nkind: DNSZone\nmetadata: {name: a}\n---\napiVersion: service.io/v1alpha1\nmetadata: {name: b}\n",
			Error{Source: "s.yaml", Document: 2, Line: 5, Field: "kind"}},
		{"missing apiVersion", "kind: DNSZone\nmetadata: {name: a}\n",
			Error{Source: "s.yaml", Document: 1, Line: 1, Field: "apiVersion"}},
		{"missing name", "apiVersion: service.io/v1alpha1\nkind: DNSZone\nmetadata:\n  labels: {}\n",
			Error{Source: "s.yaml", Document: 1, Line: 3, Field: "metadata.name"}},
		{"malformed", "apiVersion: service.io/v1alpha1\nkind: DNSZone\nmetadata: {name: a}\n---\nkind: DNSZone\nkey: [x\nnext: 1\n", Error{Source: "s.yaml", Document: 2, Line: 5}}, // the line the YAML parser reports: its context mark,
		{"array item", `[{"apiVersion":"service.io/v1alpha1","kind":"DNSZone","metadata":{"name":"a"}},{"kind":"DNSZone"}]`,
			Error{Source: "s.yaml", Document: 1, Item: 2, Line: 1, Field: "apiVersion"}},
		{"infinite float", "apiVersion: service.io/v1alpha1\nkind: DNSZone\nmetadata: {name: a}\nspec:\n  x: .inf\n",
			Error{Source: "s.yaml", Document: 1, Line: 5, Field: "spec.x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode("s.yaml", []byte(tc.in))
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("got %v, want an error", err)
			}
			e := *es[0]
			e.Message = ""
			if e != tc.want {
				t.Fatalf("got %+v, want %+v (%v)", e, tc.want, es[0])
			}
			if !strings.HasPrefix(es[0].Error(), "s.yaml: document") {
				t.Fatalf("message %q does not lead with the source and document", es[0].Error())
			}
		})
	}
}

func TestBounds(t *testing.T) {
	big := bytes.Repeat([]byte("#"), MaxBytes+1)
	if _, err := Decode("big.yaml", big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized input: %v", err)
	}
	if _, err := DecodeReader("big.yaml", bytes.NewReader(big)); err == nil {
		t.Fatal("oversized reader accepted")
	}
	// A billion-laughs document expands past the node budget.
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		b.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	if _, err := Decode("laughs.yaml", []byte(b.String())); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("alias bomb: %v", err)
	}
}

func TestFromMaps(t *testing.T) {
	objs, err := FromMaps("/etc/service/service.yaml", []map[string]any{
		{"apiVersion": "service.io/v1alpha1", "kind": "DNSZone", "metadata": map[string]any{"name": "a"}, "spec": map[string]any{"defaultTTL": 60}},
		{"apiVersion": "service.io/v1alpha1", "metadata": map[string]any{"name": "b"}},
	})
	if len(objs) != 1 || objs[0].GetName() != "a" {
		t.Fatalf("objects %v", objs)
	}
	if ttl, ok := objs[0].Object["spec"].(map[string]any)["defaultTTL"].(int64); !ok || ttl != 60 {
		t.Fatalf("defaultTTL not normalised to int64: %#v", objs[0].Object["spec"])
	}
	var es Errors
	if !errors.As(err, &es) || len(es) != 1 || es[0].Item != 2 || es[0].Field != "kind" {
		t.Fatalf("error %v, want item 2 field kind", err)
	}
}

func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/in/*")
	for _, fn := range files {
		if b, err := os.ReadFile(fn); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("a: &a [*a]"))
	f.Add([]byte("{\"kind\": \"List\", \"items\": [1, {}]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := Decode("fuzz", data)
		for _, o := range objs {
			// Every object returned is a well-formed service.io object that
			// encodes as JSON.
			if o.GetAPIVersion() != APIVersion || o.GetKind() == "" || o.GetName() == "" {
				t.Fatalf("bad object returned: %v", o.Object)
			}
			if _, err := json.Marshal(o.Object); err != nil {
				t.Fatalf("object does not encode: %v", err)
			}
		}
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %T is not Errors", err)
			}
		}
	})
}
