package xfr_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/dataplane/xfr"
)

// FuzzXFRRequest: whatever bytes arrive as a transfer request or as a
// signed query, the handler neither panics nor writes a message that does
// not parse, and a request it cannot verify gets no zone data.
func FuzzXFRRequest(f *testing.F) {
	tab := zone(f, 20, 1)
	srv := xfr.New(xfr.Config{Keys: xfr.Keyring{keyName: {Name: keyName, Algorithm: dns.HmacSHA256, Secret: secret}}, MessageSize: 512,
		Logger: slog.New(slog.DiscardHandler)})
	seed := func(m *dns.Msg, sign bool) {
		if sign {
			m.SetTsig(keyName, dns.HmacSHA256, 300, time.Now().Unix())
			b, _, err := dns.TsigGenerate(m, secret, "", false)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
			return
		}
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	m := new(dns.Msg)
	m.SetAxfr("example.test.")
	seed(m, true)
	m = new(dns.Msg)
	m.SetAxfr("example.test.")
	seed(m, false)
	m = new(dns.Msg)
	m.SetIxfr("example.test.", 1000, "ns1.example.test.", "hostmaster.example.test.")
	seed(m, true)
	m = new(dns.Msg)
	m.SetQuestion("www.example.test.", dns.TypeA)
	seed(m, true)
	f.Add([]byte{0, 1, 0, 0, 0, 1})

	f.Fuzz(func(t *testing.T, in []byte) {
		data := 0
		write := func(b []byte) error {
			r := new(dns.Msg)
			if err := r.Unpack(b); err != nil && len(b) > 12 {
				t.Fatalf("wrote a message that does not parse: %v", err)
			}
			for _, rr := range r.Answer {
				if rr.Header().Rrtype != dns.TypeSOA {
					data++
				}
			}
			return nil
		}
		res := srv.Transfer(context.Background(), dataplane.TransferRequest{Msg: in, Transport: dataplane.TransportTCP, Table: tab, Write: write})
		if data > 0 && res.Key == "" {
			t.Fatalf("zone data sent for an unsigned request (%s)", res.Mode)
		}
		if data > 0 && res.Rcode != dns.RcodeSuccess {
			t.Fatalf("zone data sent with rcode %d", res.Rcode)
		}
		resp := append([]byte(nil), in...)
		out := srv.SignAnswer(in, resp)
		if len(out) > 0 && len(out) != len(in) {
			r := new(dns.Msg)
			if err := r.Unpack(out); err != nil {
				t.Fatalf("signed answer does not parse: %v", err)
			}
		}
	})
}

// version compiles example.test holding the records of mask (a pool of
// 12, two names of which share types), with serial 1000+gen.
func version(t testing.TB, mask uint16, gen int64) *authority.Table {
	t.Helper()
	var eps []v1alpha1.Endpoint
	for i := range 12 {
		if mask&(1<<i) == 0 {
			continue
		}
		name := fmt.Sprintf("n%d.example.test", i%5)
		switch i % 3 {
		case 0:
			eps = append(eps, v1alpha1.Endpoint{DNSName: name, RecordType: "A", Targets: []string{fmt.Sprintf("192.0.2.%d", i)}})
		case 1:
			eps = append(eps, v1alpha1.Endpoint{DNSName: name, RecordType: "TXT", Targets: []string{fmt.Sprintf("t%d", i)}})
		default:
			ttl := int64(60 + i)
			eps = append(eps, v1alpha1.Endpoint{DNSName: name, RecordType: "AAAA", Targets: []string{fmt.Sprintf("2001:db8::%d", i)}, RecordTTL: &ttl})
		}
	}
	z := v1alpha1.DNSZone{}
	z.Name, z.UID, z.Generation = "example.test", "uid-z", gen
	z.Spec.NameServers = []string{"ns1.example.test."}
	z.Spec.SOA = &v1alpha1.SOA{Serial: 1000 + gen}
	z.Spec.Policy = &v1alpha1.ZonePolicy{TransferTSIGKeyRefs: []string{"k1"}}
	sets := []v1alpha1.DNSRecordSet{}
	if len(eps) > 0 {
		rs := v1alpha1.DNSRecordSet{}
		rs.Namespace, rs.Name, rs.UID, rs.Generation = "default", "r", "uid-r", gen
		rs.Spec.ZoneRef.Name = "example.test"
		rs.Spec.Endpoints = eps
		sets = append(sets, rs)
	}
	tab, problems := authority.Compile([]v1alpha1.DNSZone{z}, sets, time.Now())
	if len(problems) > 0 {
		t.Fatalf("compile: %v", problems)
	}
	return tab
}

func contents(tz authority.TransferZone) []string {
	var out []string
	tz.Each(func(rr dns.RR) bool {
		out = append(out, rr.String())
		return true
	})
	slices.Sort(out)
	return out
}

// FuzzJournal: after any sequence of versions, the changes the journal
// answers from each serial it still holds turn that version into the
// current one exactly; the last maxChanges serials are always held.
func FuzzJournal(f *testing.F) {
	f.Add([]byte{0x01, 0x00, 0x03, 0x00, 0xff, 0x0f, 0x00, 0x00})
	f.Add([]byte{0xff, 0xff, 0x00, 0x00, 0x55, 0x05, 0xaa, 0x0a, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, in []byte) {
		const maxChanges = 4
		if len(in) > 24 {
			in = in[:24]
		}
		j := xfr.NewJournal(maxChanges, 1<<20)
		var versions [][]string
		var serials []uint32
		var cur authority.TransferZone
		for i := 0; i+1 < len(in); i += 2 {
			mask := uint16(in[i]) | uint16(in[i+1])<<8
			tab := version(t, mask, int64(len(versions)+1))
			j.Observe(tab)
			tz, _ := tab.TransferZone([]byte("\x07example\x04test\x00"))
			cur = tz
			versions = append(versions, contents(tz))
			serials = append(serials, tz.Serial())
		}
		if len(versions) == 0 {
			return
		}
		want := versions[len(versions)-1]
		for i := range len(versions) - 1 {
			changes, ok := j.Since(cur, serials[i])
			if !ok {
				if len(versions)-1-i <= maxChanges {
					t.Fatalf("serial %d (%d changes back) not answered; the journal keeps %d", serials[i], len(versions)-1-i, maxChanges)
				}
				continue
			}
			have := map[string]bool{}
			for _, s := range versions[i] {
				have[s] = true
			}
			for _, c := range changes {
				for _, rr := range c.Deleted {
					if !have[rr.String()] {
						t.Fatalf("from %d: deletes %s, which the version does not hold", serials[i], rr)
					}
					delete(have, rr.String())
				}
				for _, rr := range c.Added {
					have[rr.String()] = true
				}
			}
			var got []string
			for s := range have {
				got = append(got, s)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("from %d the changes give\n%v\nwant\n%v", serials[i], got, want)
			}
		}
	})
}
