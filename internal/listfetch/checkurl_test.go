package listfetch

import (
	"context"
	"errors"
	"testing"
)

// The fetcher refuses with the same rule the write path uses (CheckURL):
// a file:// URL never reaches the network, and a loopback literal is
// refused by name unless blocking.allowLocalListURLs.
func TestCheckURLIsTheFetchersRule(t *testing.T) {
	f, err := New(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Fetch(context.Background(), "file:///etc/hosts"); !errors.Is(err, ErrScheme) {
		t.Errorf("file:// fetch: %v, want ErrScheme", err)
	}
	if err := CheckURL("http://127.0.0.1/l", false); !errors.Is(err, ErrForbiddenAddress) {
		t.Errorf("loopback: %v", err)
	}
	if err := CheckURL("http://[::1]/l", true); err != nil {
		t.Errorf("loopback allowed: %v", err)
	}
	if err := CheckURL("http://192.168.1.2/l", false); err != nil {
		t.Errorf("LAN address: %v", err)
	}
}
