package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzApplyBody: whatever the streaming scanner accepts is valid JSON and
// decodes to the objects encoding/json finds in the same body (one
// object, an array, or a List's items); a body encoding/json accepts
// with objects under the caps is not refused as malformed.
func FuzzApplyBody(f *testing.F) {
	for _, s := range []string{
		`{"kind":"BlockList","metadata":{"name":"a"}}`,
		`[{"kind":"A"},{"kind":"B","x":[1,2,{"y":"\"]}"}]}]`,
		`{"kind":"List","apiVersion":"v1","items":[{"kind":"A"}]}`,
		`{"items":[1],"kind":"X"}`,
		` [ ] `, `{}`, `[1]`, `"s"`, `{"a":1,}`, `[{"a":"\u00e9\\"}]`, `{"a":tru}`, `[{}] x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, e := decodeApplyBody(bytes.NewReader(body), int64(len(body)))
		if e != nil {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		var v any
		d := json.NewDecoder(bytes.NewReader(body))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
		var want []any
		switch x := v.(type) {
		case []any:
			want = x
		case map[string]any:
			if x["kind"] == "List" {
				want, _ = x["items"].([]any)
			} else {
				want = []any{x}
			}
		default:
			t.Fatalf("accepted a body that is neither an object nor an array: %q", body)
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d objects, encoding/json finds %d", body, len(got), len(want))
		}
		for i := range got {
			// Compare through JSON: the scanner's path decodes numbers
			// as int64/float64 (unstructured), encoding/json as Number.
			a, _ := json.Marshal(got[i])
			b, _ := json.Marshal(want[i])
			var x, y any
			_ = json.Unmarshal(a, &x)
			_ = json.Unmarshal(b, &y)
			if !reflect.DeepEqual(x, y) {
				t.Fatalf("%q: object %d is %s, encoding/json: %s", body, i, a, b)
			}
		}
	})
}
