package querylog

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// blockV1Fixture is the block the version 1 encoder (before client IDs)
// wrote for normalizeRows(layoutRows(6, 2026-05-01T10:00Z), 1) with an
// empty names dictionary.
const blockV1Fixture = "010680a0cdcdd4afa806040000000040420f0080841e00c0c62d0000093d00404b4c0000010001020304050601000a141e283264312e6578616d706c6564322e6578616d706c6564332e6578616d706c6564342e6578616d706c6564352e6578616d706c6501000102030405060100081018202831302e302e302e3131302e302e302e3231302e302e302e3331302e302e302e3431302e302e302e35010001020304050503151f292b010001010203040305171b01000102000102020721010000000100000109020b0001000101010100020023010000000100000200250100000001000002002701000000010000020d0001000101010101020f0001000101010101021100010001010101000313191d01000102000102"

// encodeV1 writes rows without client IDs as the version 1 encoder did: a
// version 2 block whose last column (client_id) holds only "" is the
// version 1 block plus that column's two bytes (one value, "").
func encodeV1(tb testing.TB, enc *blockEncoder, nm *names, pb *postingBuilder, rows []Row) (data []byte, tsMin, tsMax int64) {
	tb.Helper()
	for i := range rows {
		if rows[i].ClientID != "" {
			tb.Fatalf("row %d has a client ID: version 1 blocks have none", i)
		}
	}
	v2, tsMin, tsMax := enc.encode(nm, pb, rows)
	if n := len(v2); v2[0] != 2 || v2[n-2] != 1 || v2[n-1] != 0 {
		tb.Fatalf("version 2 block does not end in an empty client_id column: % x", v2[max(n-4, 0):])
	}
	return append([]byte{1}, v2[1:len(v2)-2]...), tsMin, tsMax
}

// A version 1 block (written before client IDs) still decodes to its rows,
// with no client ID; encodeV1 writes exactly what the old encoder wrote.
func TestBlockV1StillDecodes(t *testing.T) {
	fixture, err := hex.DecodeString(blockV1Fixture)
	if err != nil {
		t.Fatal(err)
	}
	rows := normalizeRows(layoutRows(6, time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)), 1)
	nm := newNames()
	var enc blockEncoder
	var pb postingBuilder
	pb.reset()
	v1, _, _ := encodeV1(t, &enc, nm, &pb, rows)
	if !reflect.DeepEqual(v1, fixture) {
		t.Fatalf("encodeV1 differs from the version 1 encoder:\n got %x\nwant %x", v1, fixture)
	}
	b, err := decodeBlock(1, fixture, nm)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]Row, len(rows))
	for i := range got {
		b.row(1+int64(i), &got[i])
	}
	if !reflect.DeepEqual(got, rows) {
		t.Fatalf("version 1 rows differ:\n got %+v\nwant %+v", got, rows)
	}
	// A version 2 block is one column longer: read as version 1 it has
	// trailing bytes, and a version 1 block read as version 2 is short.
	v2 := append([]byte(nil), fixture...)
	v2[0] = 2
	if _, err := decodeBlock(1, v2, nm); err == nil {
		t.Fatal("a version 1 body labelled version 2 decoded")
	}
	for _, v := range []byte{0, 3, 255} {
		bad := append([]byte{v}, fixture[1:]...)
		if _, err := decodeBlock(1, bad, nm); err == nil {
			t.Fatalf("version %d decoded", v)
		}
	}
}

// A query log written before client IDs (version 1 blocks) opens after
// the upgrade: its rows read back unchanged, new rows carry their client
// ID, and the client_id filter finds only those.
func TestQueryLogV1FileSurvivesUpgrade(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.DataDir, cfg.RetentionRaw = dir, 0
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	old := layoutRows(300, base)

	w, err := Open(ctx, cfg, Options{MaintainEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	w.posts.pub = nil // the earlier binary wrote each batch's postings
	w.storeRows = func(d *dconn, rows []Row) error {
		w.posts.reset()
		data, tsMin, tsMax := encodeV1(t, &w.enc, w.store.names, &w.posts, rows)
		for _, e := range w.store.names.staged {
			if err := d.exec("INSERT INTO names (id, kind, name) VALUES (?, ?, ?)", e.id, int64(e.kind), e.name); err != nil {
				return err
			}
		}
		if err := d.exec(insertBlockSQL, rows[0].ID, rows[len(rows)-1].ID, tsMin, tsMax, data); err != nil {
			return err
		}
		return w.posts.write(d)
	}
	for i := 0; i < len(old); i += 100 {
		if err := w.write(ctx, append([]Row(nil), old[i:i+100]...)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	w = openTest(t, cfg, Options{})
	checkLayout(t, w)
	fresh := layoutRows(40, base.Add(30*time.Minute))
	for i := range fresh {
		switch i % 4 {
		case 0:
			fresh[i].ClientID = "kids"
		case 1:
			fresh[i].ClientID = "laptop-7"
		}
		w.Enqueue(fresh[i])
	}
	flush(t, w)
	want := append(normalizeRows(old, 1), normalizeRows(fresh, int64(len(old))+1)...)
	if got := allRows(t, w); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows after the upgrade differ: %d rows, want %d", len(got), len(want))
	}
	var versions []int
	rs, err := w.store.r.QueryContext(ctx, "SELECT DISTINCT unicode(substr(data, 1, 1)) FROM blocks ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var v int
		if err := rs.Scan(&v); err != nil {
			t.Fatal(err)
		}
		versions = append(versions, v)
	}
	rs.Close()
	if !reflect.DeepEqual(versions, []int{1, 2}) {
		t.Fatalf("block versions on disk %v, want [1 2]", versions)
	}
	page, err := w.List(ctx, Filter{ClientID: "kids", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 10 {
		t.Fatalf("client_id=kids: %d rows, want 10", len(page.Items))
	}
	for _, it := range page.Items {
		if it.ClientID != "kids" || it.ID <= int64(len(old)) {
			t.Fatalf("client_id=kids listed %+v", it)
		}
	}
	b, _ := json.Marshal(page.Items[0])
	if !contains(string(b), `"client_id":"kids"`) {
		t.Fatalf("API row: %s", b)
	}
	// Rows without a client ID leave the field out.
	b, _ = json.Marshal(want[0].Item())
	if contains(string(b), "client_id") {
		t.Fatalf("API row without a client ID: %s", b)
	}
}

// The client ID identifies a person or device like the client name: the
// privacy modes that drop or anonymise the client drop it too; the others
// keep it, and the structured log line carries it.
func TestClientIDPrivacyAndSlog(t *testing.T) {
	for _, tc := range []struct {
		privacy string
		keep    bool
	}{{PrivacyFull, true}, {PrivacyHideDomains, true}, {PrivacyAnonymizeClient, false}, {PrivacyHideDomainsClients, false}} {
		p, err := compilePolicy(Config{Enabled: true, Privacy: tc.privacy, Anonymize: AnonymizePrefix}, []byte("k"))
		if err != nil {
			t.Fatal(err)
		}
		r := Row{Client: "192.0.2.7", ClientName: "tablet", ClientID: "kids", Domain: "a.example"}
		p.apply(&r)
		if got := r.ClientID != ""; got != tc.keep {
			t.Errorf("privacy %s: client ID %q", tc.privacy, r.ClientID)
		}
		if r.ClientID == "" && r.ClientName != "" {
			t.Errorf("privacy %s: client ID dropped but not the name", tc.privacy)
		}
	}

	cfg := DefaultConfig()
	cfg.Sink = SinkSlog
	var buf syncBuffer
	w := openTest(t, cfg, Options{Logger: newJSONLogger(&buf)})
	r := row(time.Now(), "slog.example", "10.0.0.1", "answered")
	r.ClientID = "kids"
	w.Enqueue(r)
	flush(t, w)
	if s := buf.String(); !contains(s, `"client_id":"kids"`) {
		t.Fatalf("slog line: %s", s)
	}
}

// The live stream's filter matches the client ID exactly.
func TestClientIDFilterMatch(t *testing.T) {
	f := Filter{ClientID: "kids"}
	for id, want := range map[string]bool{"kids": true, "": false, "KIDS": false, "kids2": false} {
		if got := f.Match(&Row{ClientID: id}); got != want {
			t.Errorf("client ID %q: match %v", id, got)
		}
	}
}
