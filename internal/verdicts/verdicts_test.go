package verdicts

import (
	"errors"
	"testing"
	"time"
)

func TestCache(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := New[string](15*time.Minute, 10*time.Second, 3)
	ok, bad := Key("good"), Key("bad")
	c.Put(ok, "alice", nil, now.Add(5*time.Minute), now)
	c.Put(bad, "", errors.New("rejected"), time.Time{}, now)
	if v, err, hit := c.Get(ok, now.Add(4*time.Minute), nil); !hit || err != nil || v != "alice" {
		t.Fatalf("accepted verdict: %q %v %v", v, err, hit)
	}
	if _, _, hit := c.Get(ok, now.Add(5*time.Minute), nil); hit {
		t.Fatal("accepted verdict kept past the credential's expiry")
	}
	if _, err, hit := c.Get(bad, now.Add(9*time.Second), nil); !hit || err == nil {
		t.Fatal("rejection not cached")
	}
	if _, _, hit := c.Get(bad, now.Add(10*time.Second), nil); hit {
		t.Fatal("rejection kept past its TTL")
	}
	// No expiry of its own: the accept TTL bounds it.
	c.Put(ok, "alice", nil, time.Time{}, now)
	if _, _, hit := c.Get(ok, now.Add(15*time.Minute), nil); hit {
		t.Fatal("accepted verdict kept past the accept TTL")
	}
	if _, _, hit := c.Get(ok, now, func(v string, _ error) bool { return v == "bob" }); hit {
		t.Fatal("keep refused the verdict but it was returned")
	}
	// Bounded: a fourth key with nothing expired starts over.
	c.Clear()
	for _, k := range []string{"a", "b", "c", "d"} {
		c.Put(Key(k), k, nil, time.Time{}, now)
	}
	if _, _, hit := c.Get(Key("a"), now, nil); hit {
		t.Fatal("cache grew past its bound")
	}
	if v, _, hit := c.Get(Key("d"), now, nil); !hit || v != "d" {
		t.Fatal("newest verdict lost")
	}
	// Expired entries make room first.
	c.Clear()
	c.Put(Key("old"), "old", errors.New("no"), time.Time{}, now)
	c.Put(Key("b"), "b", nil, time.Time{}, now)
	c.Put(Key("c"), "c", nil, time.Time{}, now)
	later := now.Add(time.Minute)
	c.Put(Key("e"), "e", nil, time.Time{}, later)
	if _, _, hit := c.Get(Key("b"), later, nil); !hit {
		t.Fatal("a live verdict was dropped while an expired one could go")
	}
	if c.Hits() == 0 {
		t.Fatal("hits not counted")
	}
}
