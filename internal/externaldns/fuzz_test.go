package externaldns

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecodeChanges: the decoder of POST /records (and, through the same
// checks, /adjustendpoints) never panics, and whatever it accepts survives
// the trip into a DNSRecordSet endpoint and back unchanged, as JSON too:
// external-dns reads back exactly what it wrote.
func FuzzDecodeChanges(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"create":[{"dnsName":"www.example.test","targets":["192.0.2.1","192.0.2.2"],"recordType":"A","recordTTL":300}]}`,
		`{"updateOld":[{"dnsName":"a.example.test","recordType":"TXT","targets":["x"]}],"updateNew":[{"dnsName":"a.example.test","recordType":"TXT","targets":["heritage=external-dns,external-dns/owner=default"],"labels":{"owner":"default"}}]}`,
		`{"delete":[{"dnsName":"_sip._tcp.example.test","recordType":"SRV","targets":["10 60 5060 sip.example.test."],"setIdentifier":"eu","providerSpecific":[{"name":"p","value":""}]}]}`,
		`{"create":[{"dnsName":"example.test","recordType":"CAA","targets":["0 issue \"letsencrypt.org\""]}]}`,
		`{"create":[null]}`,
		`{"create":[{"dnsName":"x","recordType":"A","targets":[""]}]}`,
		`{"create":[{"dnsName":"x","recordType":"A","targets":["1"],"recordTTL":-1}]}`,
		`[{"dnsName":"x","recordType":"A","targets":["1"]}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if eps, err := DecodeEndpoints(bytes.NewReader(b), 1<<20); err == nil {
			for _, ep := range eps {
				roundTrip(t, ep)
			}
		}
		ch, err := DecodeChanges(bytes.NewReader(b), 1<<20)
		if err != nil {
			return
		}
		for _, l := range [][]*Endpoint{ch.Create, ch.UpdateOld, ch.UpdateNew, ch.Delete} {
			for _, ep := range l {
				roundTrip(t, ep)
			}
		}
	})
}

func roundTrip(t *testing.T, ep *Endpoint) {
	t.Helper()
	rec := toRecord(ep)
	// Through the stored JSON form, as the store keeps it.
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatalf("marshal record: %v", err)
	}
	var back = rec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("unmarshal record: %v", err)
	}
	got := fromRecord(&back)
	want := *ep
	// Empty and absent collections are the same on the wire (omitempty).
	if len(want.Labels) == 0 {
		want.Labels = nil
	}
	if len(want.ProviderSpecific) == 0 {
		want.ProviderSpecific = nil
	}
	if len(want.Targets) == 0 {
		want.Targets = nil
	}
	if len(got.Targets) == 0 {
		got.Targets = nil
	}
	if !reflect.DeepEqual(got, &want) {
		t.Fatalf("round trip changed the endpoint:\n got %+v\nwant %+v", got, &want)
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(&want)
	if !bytes.Equal(gj, wj) {
		t.Fatalf("round trip changed the JSON:\n got %s\nwant %s", gj, wj)
	}
	if k := objectName("example.test", ep.DNSName); len(k) > 63 {
		t.Fatalf("object name %q over 63 characters", k)
	}
}
