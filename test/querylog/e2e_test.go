package querylog_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/internal/querylog"
)

func TestStatusClassesThroughDNS(t *testing.T) {
	cfg := querylog.DefaultConfig()
	cfg.ExcludeDomains = []string{"*.excluded.example", "exact.example", "/^re[0-9]+\\.example$/"}
	cfg.ExcludeClients = []string{"192.0.2.0/24"} // not us: must not hide our rows
	e := newEnv(t, cfg, querylog.Options{})

	e.ask(t, "www.example.com.", dns.TypeA, dns.ClassINET)
	e.ask(t, "host.example.net.", dns.TypeA, dns.ClassINET)
	e.ask(t, "host.example.net.", dns.TypeA, dns.ClassINET)
	e.ask(t, "ads.example.org.", dns.TypeA, dns.ClassINET)
	e.ask(t, "rewrite.example.org.", dns.TypeA, dns.ClassINET)
	e.ask(t, "fail.example.net.", dns.TypeA, dns.ClassINET)
	e.ask(t, "version.bind.", dns.TypeTXT, dns.ClassCHAOS)
	// Served stale: cached, expired (cache clock moved on), upstream down.
	e.ask(t, "stale.example.net.", dns.TypeA, dns.ClassINET)
	e.skew.Store(int64(10 * time.Minute))
	e.fwd.down.Store(true)
	e.ask(t, "stale.example.net.", dns.TypeA, dns.ClassINET)
	// None of these may leave a row.
	e.ask(t, "nolog.example.org.", dns.TypeA, dns.ClassINET)
	e.ask(t, "a.excluded.example.", dns.TypeA, dns.ClassINET)
	e.ask(t, "exact.example.", dns.TypeA, dns.ClassINET)
	e.ask(t, "re42.example.", dns.TypeA, dns.ClassINET)
	e.ask(t, "printer.local.", dns.TypeA, dns.ClassINET)
	e.ask(t, "router.home.arpa.", dns.TypeA, dns.ClassINET)
	e.ask(t, "1.0.168.192.in-addr.arpa.", dns.TypePTR, dns.ClassINET)
	e.ask(t, "localhost.", dns.TypeA, dns.ClassINET)
	e.flush(t)

	rows := e.all(t, querylog.Filter{Limit: 3})
	got := map[string][]string{}
	for _, r := range rows {
		got[r.Domain] = append(got[r.Domain], r.Status)
	}
	want := map[string][]string{
		"www.example.com":     {"authoritative"},
		"host.example.net":    {"cached", "answered"}, // newest first
		"ads.example.org":     {"blocked"},
		"rewrite.example.org": {"rewritten"},
		"fail.example.net":    {"failed"},
		"version.bind":        {"refused"},
		"stale.example.net":   {"stale", "answered"},
	}
	if len(got) != len(want) {
		t.Fatalf("rows for %v, want exactly %v", got, want)
	}
	for d, st := range want {
		if !slices.Equal(got[d], st) {
			t.Errorf("%s: statuses %v, want %v", d, got[d], st)
		}
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].ID >= rows[i-1].ID {
			t.Fatalf("rows not newest first: %d then %d", rows[i-1].ID, rows[i].ID)
		}
	}
	for _, r := range rows {
		// CHAOS is refused at ingress, before the client is identified.
		wantName := map[bool]string{true: "", false: "laptop"}[r.Domain == "version.bind"]
		if r.Client != "127.0.0.1" || r.ClientName != wantName || r.Node != "node-a" || r.Transport != "udp" {
			t.Errorf("row %+v: want client 127.0.0.1 (laptop) on node-a over udp", r)
		}
		if r.Domain == "ads.example.org" && (r.List != "ads" || r.Rule != "ads.example.org" || r.Policy != "default/kids") {
			t.Errorf("blocked row lacks list/rule/policy: %+v", r)
		}
		if r.Domain == "version.bind" && (r.QType != "TXT" || r.Rcode != "REFUSED") {
			t.Errorf("refused row: %+v", r)
		}
		if r.Domain == "host.example.net" && r.Status == "answered" && r.Upstream != "192.0.2.53:53" {
			t.Errorf("answered row lacks upstream: %+v", r)
		}
	}

	ctx := context.Background()
	// Filters.
	for _, tc := range []struct {
		name string
		f    querylog.Filter
		want []string
	}{
		{"status class error", querylog.Filter{StatusClass: "error"}, []string{"version.bind", "fail.example.net"}},
		{"status", querylog.Filter{Status: "cached"}, []string{"host.example.net"}},
		{"domain exact", querylog.Filter{Domain: "ads.example.org"}, []string{"ads.example.org"}},
		{"domain substring", querylog.Filter{Domain: "example.org", DomainMatch: querylog.MatchSubstring}, []string{"rewrite.example.org", "ads.example.org"}},
		{"list", querylog.Filter{List: "ads"}, []string{"ads.example.org"}},
		{"qtype", querylog.Filter{QType: "TXT"}, []string{"version.bind"}},
		{"policy", querylog.Filter{Policy: "default/kids"}, []string{"rewrite.example.org", "ads.example.org"}},
		{"upstream", querylog.Filter{Upstream: "192.0.2.53:53"}, []string{"stale.example.net", "host.example.net"}},
		{"client", querylog.Filter{Client: "127.0.0.2"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var doms []string
			for _, r := range e.all(t, tc.f) {
				doms = append(doms, r.Domain)
			}
			if !slices.Equal(doms, tc.want) {
				t.Fatalf("got %v, want %v", doms, tc.want)
			}
		})
	}

	// Blocked items, stats, clients.
	bp, err := e.w.Blocked(ctx, querylog.Filter{})
	if err != nil || len(bp.Items) != 1 || bp.Items[0].Domain != "ads.example.org" || bp.Items[0].List != "ads" || bp.Items[0].ClientName != "laptop" {
		t.Fatalf("blocked: %+v %v", bp, err)
	}
	sum, err := e.w.Summary(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Total != 9 || sum.Blocked != 1 || sum.ByClass["error"] != 2 || sum.ByClass["allowed"] != 5 || sum.ByClass["rewritten"] != 1 || sum.ByStatus["cached"] != 1 {
		t.Fatalf("summary %+v", sum)
	}
	if sum.BlockedShare < 0.11 || sum.BlockedShare > 0.112 || sum.Window != "24h0m0s" {
		t.Fatalf("summary share/window %+v", sum)
	}
	top, err := e.w.Top(ctx, querylog.TopRequest{Dim: querylog.DimDomains, N: 1})
	if err != nil || len(top.Items) != 1 || top.Items[0].Key != "host.example.net" || top.Items[0].Count != 2 {
		t.Fatalf("top domains: %+v %v", top, err)
	}
	top, err = e.w.Top(ctx, querylog.TopRequest{Dim: querylog.DimLists, Blocked: true})
	if err != nil || len(top.Items) != 1 || top.Items[0].Key != "ads" || top.Items[0].Blocked != 1 {
		t.Fatalf("top blocked lists: %+v %v", top, err)
	}
	if _, err := e.w.Top(ctx, querylog.TopRequest{N: 101}); err == nil {
		t.Fatal("top 101 accepted")
	}
	cl, err := e.w.Clients(ctx, querylog.ClientsRequest{})
	if err != nil || len(cl.Items) != 1 {
		t.Fatalf("clients: %+v %v", cl, err)
	}
	if c := cl.Items[0]; c.Key != "127.0.0.1" || c.Count != 9 || c.Blocked != 1 || c.Name != "laptop" || c.Group != "kids" || c.LastSeen == nil {
		t.Fatalf("client item %+v", c)
	}
	ts, err := e.w.ClientTimeseries(ctx, querylog.TimeseriesRequest{})
	if err != nil || len(ts.Clients) != 1 || ts.Clients[0].Name != "laptop" || ts.Scope != "node" || len(ts.Points) < 24 || len(ts.Points) > 25 {
		t.Fatalf("timeseries: %+v %v", ts, err)
	}
	var n int64
	for _, p := range ts.Points {
		if p.Counts != nil {
			n += p.Counts[0]
		}
	}
	if n != 9 {
		t.Fatalf("timeseries counts %d, want 9", n)
	}
}

func TestPrivacyModes(t *testing.T) {
	e := newEnv(t, querylog.DefaultConfig(), querylog.Options{})
	for _, tc := range []struct {
		privacy, anonymize string
		client, name       string // want; "*anon" = pseudonym
		domain             string
		row                bool
	}{
		{"full", "prefix", "127.0.0.1", "laptop", "p1.example.net", true},
		{"anonymize_client", "prefix", "127.0.0.0", "", "p2.example.net", true},
		{"anonymize_client", "pseudonym", "*anon", "", "p3.example.net", true},
		{"hide_domains", "prefix", "127.0.0.1", "laptop", "", true},
		{"hide_domains_clients", "prefix", "", "", "", true},
		{"nothing", "prefix", "", "", "", false},
	} {
		t.Run(tc.privacy+"/"+tc.anonymize, func(t *testing.T) {
			cfg := querylog.DefaultConfig()
			cfg.Privacy, cfg.Anonymize, cfg.Node = tc.privacy, tc.anonymize, "node-a"
			if err := e.w.Update(cfg); err != nil {
				t.Fatal(err)
			}
			before, _, _ := e.w.Rows(context.Background(), querylog.Filter{Limit: 1})
			qname := "p-" + strings.ReplaceAll(tc.privacy+"-"+tc.anonymize, "_", "-") + ".example.net."
			if tc.domain != "" {
				qname = tc.domain + "."
			}
			e.ask(t, qname, dns.TypeA, dns.ClassINET)
			e.flush(t)
			after, _, _ := e.w.Rows(context.Background(), querylog.Filter{Limit: 1})
			if !tc.row {
				if len(after) != len(before) || (len(after) > 0 && after[0].ID != before[0].ID) {
					t.Fatalf("privacy nothing left a row: %+v", after)
				}
				return
			}
			if len(after) != 1 || (len(before) == 1 && after[0].ID == before[0].ID) {
				t.Fatalf("no new row")
			}
			r := after[0]
			if tc.client == "*anon" {
				if !strings.HasPrefix(r.Client, "anon-") || len(r.Client) != 21 {
					t.Fatalf("pseudonym %q", r.Client)
				}
			} else if r.Client != tc.client {
				t.Fatalf("client %q, want %q", r.Client, tc.client)
			}
			if r.ClientName != tc.name || r.Domain != tc.domain {
				t.Fatalf("row %+v: want name %q domain %q", r, tc.name, tc.domain)
			}
			if r.Status != "answered" {
				t.Fatalf("status %q", r.Status)
			}
		})
	}
	// privacy nothing still counts the query in the totals, nothing else.
	sum, err := e.w.Summary(context.Background(), 0)
	if err != nil || sum.Total != 6 {
		t.Fatalf("summary %+v %v", sum, err)
	}
	// The pseudonym is stable for the key.
	cfg := querylog.DefaultConfig()
	cfg.Privacy, cfg.Anonymize = "anonymize_client", "pseudonym"
	if err := e.w.Update(cfg); err != nil {
		t.Fatal(err)
	}
	e.ask(t, "again.example.net.", dns.TypeA, dns.ClassINET)
	e.flush(t)
	rows := e.all(t, querylog.Filter{Domain: "again.example.net"})
	prev := e.all(t, querylog.Filter{Domain: "p3.example.net"})
	if len(rows) != 1 || len(prev) != 1 || rows[0].Client != prev[0].Client {
		t.Fatalf("pseudonym not stable: %+v vs %+v", rows, prev)
	}
}
