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
	// The data plane's parse behind Admit (semantic.go).
	f.Add([]byte(`{"apiVersion":"service.io/v1alpha1","kind":"DNSRecordSet","metadata":{"name":"r","namespace":"d"},"spec":{"zoneRef":{"name":"z"},"endpoints":[{"dnsName":"a b","recordType":"MX","targets":["mail."]},{"dnsName":"x","recordType":"CNAME","targets":["y."]},{"dnsName":"x","recordType":"A","targets":["192.0.2.300"]}]}}`))
	f.Add([]byte("apiVersion: service.io/v1alpha1\nkind: Policy\nmetadata: {name: p, namespace: d}\nspec: {blockTTL: 5 minutes, schedule: {start: \"21:00\", end: \"07:00\", tz: Europe/Berln}}\n"))
	f.Add([]byte(`{"apiVersion":"service.io/v1alpha1","kind":"DNSZone","metadata":{"name":"z.test"},"spec":{"queryAccess":{"allowCIDRs":["10.0.0.0/33"]},"nameServers":["a b"]}}`))
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
