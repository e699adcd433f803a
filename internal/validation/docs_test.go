package validation

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocExamplesAreValid admits every YAML example of docs/objects.md, so the
// documentation cannot drift from the schemas.
func TestDocExamplesAreValid(t *testing.T) {
	data, err := os.ReadFile("../../docs/objects.md")
	if err != nil {
		t.Fatal(err)
	}
	v := newValidator(t)
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(data), -1)
	seen := map[string]bool{}
	for _, b := range blocks {
		for _, doc := range strings.Split(b[1], "\n---\n") {
			obj, err := Decode([]byte(doc))
			if err != nil {
				t.Errorf("decoding example:\n%s\n%v", doc, err)
				continue
			}
			seen[obj.GetKind()] = true
			if err := v.Admit(context.Background(), obj, nil); err != nil {
				t.Errorf("example %s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	for _, k := range v.Kinds() {
		if !seen[k.Kind] {
			t.Errorf("docs/objects.md has no example of %s", k.Kind)
		}
	}
}
