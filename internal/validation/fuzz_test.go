package validation

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecodeAdmit feeds arbitrary JSON or YAML through Decode and Admit: neither
// may panic, whatever the bytes.
func FuzzDecodeAdmit(f *testing.F) {
	files, _ := filepath.Glob("../../config/samples/*.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"apiVersion":"service.io/v1alpha1","kind":"DNSZone","metadata":{"name":"root"},"spec":{"zoneName":"."}}`))
	f.Add([]byte(`{"apiVersion":"service.io/v1alpha1","kind":"APIToken","metadata":{"name":"x"},"spec":{"owner":null}}`))
	f.Add([]byte("apiVersion: service.io/v1alpha1\nkind: BlockList\nmetadata: {name: a, namespace: b}\nspec: {sources: [{}, {}], customIP: 1}\n"))
	f.Add([]byte("kind: Policy\napiVersion: service.io/v1alpha1\nmetadata: [1]\nspec: {schedule: {weekdays: [null]}}"))
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	v, err := New()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, err := Decode(data)
		if err != nil {
			return
		}
		old := obj.DeepCopy()
		_ = v.Admit(context.Background(), obj, nil)
		_ = v.Admit(context.Background(), obj, old)
	})
}
