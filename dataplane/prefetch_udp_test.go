//go:build linux

package dataplane_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/cache"
	"github.com/svcdns/svc/dataplane/policy"
	"github.com/svcdns/svc/dataplane/prefetch"
)

// watchedTable is the node's policy table, noting the names the UDP loop
// asks it to prefetch.
type watchedTable struct {
	*policy.Table
	mu    sync.Mutex
	names map[string]int
}

func (w *watchedTable) PrefetchStart(qname []byte, qtype uint16, st *prefetch.State) {
	w.mu.Lock()
	w.names[string(qname)]++
	w.mu.Unlock()
	w.Table.PrefetchStart(qname, qtype, st)
}

// TestUDPBatchPrefetchesAndAnswersAlike sends a burst of queries, blocked
// and not, in mixed case, with a malformed datagram among them, to the
// batched UDP loop over a list large enough to be prefetched: every query
// is answered as without prefetching, and every well-formed question was
// prefetched.
func TestUDPBatchPrefetchesAndAnswersAlike(t *testing.T) {
	var body strings.Builder
	for i := range 60_000 {
		fmt.Fprintf(&body, "p%d.ads%d.blk\n", i, i%97)
	}
	bl := &v1alpha1.BlockList{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "big"}}
	bl.Spec.Response = "nxdomain"
	cs, err := policy.ListCompiler{}.CompileSource(context.Background(),
		v1alpha1.BlockListSource{Name: "big", URL: "http://127.0.0.1/big.txt", Format: "domains"}, strings.NewReader(body.String()))
	if err != nil {
		t.Fatal(err)
	}
	tab, problems := policy.Compile(context.Background(), policy.Input{
		Lists: []policy.List{{Object: bl, Compiled: policy.ListCompiler{}.NewList(bl, []policy.CompiledSource{cs})}}})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	watched := &watchedTable{Table: tab, names: map[string]int{}}
	if tab.PrefetchStages() == 0 {
		t.Fatal("the list is too small to be prefetched; the test would not exercise the prefetch")
	}
	cc := cache.DefaultConfig()
	srv, err := dataplane.New(dataplane.Config{
		Node:      "t",
		Listeners: []dataplane.ListenerConfig{{Address: "127.0.0.1:0", Protocols: []string{"udp"}}},
		Sockets:   1,
		Cache:     cc,
	}, dataplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv.Swap(dataplane.NewSnapshot(dataplane.SnapshotInput{
		Blocker: watched, Identifier: tab.Groups(), BlockingEnabled: true, Forwarder: answerAll{},
	}))
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	type want struct {
		name  string
		rcode int
	}
	wants := map[uint16]want{}
	var burst [][]byte
	for i := range 48 {
		name, rcode := fmt.Sprintf("www%d.example.org.", i), dns.RcodeSuccess
		if i%2 == 0 {
			name, rcode = fmt.Sprintf("p%d.ads%d.blk.", i*1000, (i*1000)%97), dns.RcodeNameError
		}
		if i%3 == 0 {
			name = strings.ToUpper(name)
		}
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		m.Id = uint16(1000 + i)
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		wants[m.Id] = want{name, rcode}
		burst = append(burst, b)
		if i == 20 {
			burst = append(burst, []byte{0xde, 0xad, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0}) // cut short
		}
	}
	ids := map[uint16]bool{}
	for id := range wants {
		ids[id] = true
	}
	for id, m := range dataplane.SendBurst(t, srv.UDPAddrs()[0], burst, ids) {
		if w := wants[id]; m.Rcode != w.rcode || len(m.Question) != 1 || m.Question[0].Name != w.name {
			t.Errorf("%s: answer %s %v, want %s", w.name, dns.RcodeToString[m.Rcode], m.Question, dns.RcodeToString[w.rcode])
		}
	}
	watched.mu.Lock()
	for _, n := range dataplane.NotPrefetched(burst, watched.names) {
		t.Errorf("%s was not prefetched", n)
	}
	watched.mu.Unlock()

	// The same names again with EDNS: the list's verdicts are now cached
	// (the prefetch loads no record for a rule that is the name asked),
	// and each block's EDE names the rule, the name asked in lower case,
	// which the data plane took from the question.
	var again [][]byte
	edeWant := map[uint16]string{}
	for i := 0; i < 48; i += 2 {
		name := fmt.Sprintf("p%d.ads%d.blk.", i*1000, (i*1000)%97)
		m := new(dns.Msg)
		m.SetQuestion(strings.ToUpper(name), dns.TypeA)
		m.SetEdns0(1232, false)
		m.Id = uint16(2000 + i)
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		edeWant[m.Id] = "policy (global) list default/big rule " + strings.TrimSuffix(name, ".")
		again = append(again, b)
	}
	ids = map[uint16]bool{}
	for id := range edeWant {
		ids[id] = true
	}
	for id, m := range dataplane.SendBurst(t, srv.UDPAddrs()[0], again, ids) {
		var text string
		if opt := m.IsEdns0(); opt != nil {
			for _, o := range opt.Option {
				if e, ok := o.(*dns.EDNS0_EDE); ok {
					text = e.ExtraText
				}
			}
		}
		if m.Rcode != dns.RcodeNameError || text != edeWant[id] {
			t.Errorf("%d: %s, EDE %q, want NXDOMAIN with %q", id, dns.RcodeToString[m.Rcode], text, edeWant[id])
		}
	}
	ex, err := srv.Explain(context.Background(), dataplane.QueryRequest{Name: "P2000.ADS60.BLK."})
	if err != nil || ex.Rule != "p2000.ads60.blk" || ex.List != "default/big" {
		t.Errorf("explain: %+v, %v; want rule p2000.ads60.blk of default/big", ex, err)
	}
}
