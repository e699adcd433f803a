package querylog

import (
	"reflect"
	"testing"
	"time"
)

// The rollup's runs give the maps a row-by-row count gives: totals per
// minute and status, and per client the latest name and group it was seen
// with and when it was seen last, with runs broken by every field.
func TestRollupRuns(t *testing.T) {
	base := time.Date(2026, 11, 27, 10, 0, 50, 0, time.UTC)
	rows := []Row{
		{Client: "10.0.0.1", Status: "answered", Time: base, Duration: time.Millisecond},
		{Client: "10.0.0.1", Status: "answered", Time: base.Add(time.Second), Duration: 2 * time.Millisecond},
		{Client: "10.0.0.1", ClientName: "laptop", Status: "blocked", Time: base.Add(2 * time.Second)},
		{Client: "10.0.0.2", Group: "kids", Status: "blocked", Time: base.Add(15 * time.Second)},   // next minute
		{Client: "10.0.0.1", Status: "blocked", Time: base.Add(16 * time.Second)},                  // name kept
		{Client: "10.0.0.2", ClientName: "tablet", Status: "answered", Time: base.Add(-time.Hour)}, // older: last kept
		{Client: "", Status: "answered", Time: base.Add(17 * time.Second)},
		{Client: "10.0.0.3", Status: "answered", Time: base.Add(18 * time.Second)},
	}
	var a rollup
	a.reset()
	for i := range rows {
		a.add(&rows[i], i != 7) // the last row's client is not counted (privacy)
	}
	a.finish()
	m0, m1, mh := base.Unix()-50, base.Unix()+10, base.Add(-time.Hour).Unix()-50
	wantTotals := map[totalKey]totalVal{
		{m0, "answered"}: {2, 3000},
		{m0, "blocked"}:  {1, 0},
		{m1, "blocked"}:  {2, 0},
		{mh, "answered"}: {1, 0},
		{m1, "answered"}: {2, 0},
	}
	if !reflect.DeepEqual(a.totals, wantTotals) {
		t.Errorf("totals %v, want %v", a.totals, wantTotals)
	}
	wantClients := map[string]clientSeen{
		"10.0.0.1": {name: "laptop", last: base.Add(16 * time.Second).UnixMicro()},
		"10.0.0.2": {name: "tablet", group: "kids", last: base.Add(15 * time.Second).UnixMicro()},
	}
	if !reflect.DeepEqual(a.clients, wantClients) {
		t.Errorf("clients %v, want %v", a.clients, wantClients)
	}
	a.reset()
	a.finish()
	if len(a.totals) != 0 || len(a.clients) != 0 {
		t.Errorf("after reset: %v %v", a.totals, a.clients)
	}
}
