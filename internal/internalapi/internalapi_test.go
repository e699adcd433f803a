package internalapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcdns/svc/internal/internalapi"
)

type fakeStatus struct{}

func (fakeStatus) Status(context.Context) internalapi.NodeStatus {
	return internalapi.NodeStatus{Node: "node-a", SnapshotAgeSeconds: 1.5, Ready: true}
}

type fakeZones struct{}

func (fakeZones) Zones(context.Context) ([]internalapi.Zone, error) {
	return []internalapi.Zone{{Name: "example.com.", Serial: 42}}, nil
}

type dirLists string

func (d dirLists) Open(digest string) (*os.File, error) {
	return os.Open(filepath.Join(string(d), digest))
}

var key = []byte("0123456789abcdef0123456789abcdef")

func TestDerivedCredentialsAgree(t *testing.T) {
	a, err := internalapi.LoadCredentials(internalapi.Files{}, key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := internalapi.LoadCredentials(internalapi.Files{}, key)
	if err != nil {
		t.Fatal(err)
	}
	if a.Token != b.Token || !bytes.Equal(a.Cert.Certificate[0], b.Cert.Certificate[0]) {
		t.Fatal("two nodes with the same key derived different credentials")
	}
	c, _ := internalapi.LoadCredentials(internalapi.Files{}, []byte("ffffffffffffffffffffffffffffffff"))
	if c.Token == a.Token {
		t.Fatal("another key derived the same token")
	}
	if _, err := internalapi.LoadCredentials(internalapi.Files{}, nil); err == nil {
		t.Fatal("derived credentials without a key")
	}
}

func TestServeOverTLS(t *testing.T) {
	dir := t.TempDir()
	body := []byte("ads.example\ntracker.example\n")
	sum := sha256.Sum256(body)
	digest := hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(dir, digest), body, 0o600); err != nil {
		t.Fatal(err)
	}
	corrupt := strings.Repeat("ab", 32)
	if err := os.WriteFile(filepath.Join(dir, corrupt), []byte("tampered"), 0o600); err != nil {
		t.Fatal(err)
	}
	srvCreds, err := internalapi.LoadCredentials(internalapi.Files{}, key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- internalapi.Serve(ctx, ln, srvCreds, internalapi.Deps{Status: fakeStatus{}, Zones: fakeZones{}, Lists: dirLists(dir)})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	peer := ln.Addr().String()

	// Another node derives the same credentials from the same key.
	cliCreds, _ := internalapi.LoadCredentials(internalapi.Files{}, key)
	c := internalapi.NewClient(cliCreds)
	st, err := c.Status(ctx, peer)
	if err != nil || st.Node != "node-a" || !st.Ready {
		t.Fatalf("status %+v %v", st, err)
	}
	zs, err := c.Zones(ctx, peer)
	if err != nil || len(zs) != 1 || zs[0].Serial != 42 {
		t.Fatalf("zones %+v %v", zs, err)
	}
	rc, err := c.ListBody(ctx, peer, digest)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, body) {
		t.Fatalf("list body %q", got)
	}
	if _, err := c.ListBody(ctx, peer, strings.Repeat("cd", 32)); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("missing body: %v", err)
	}
	if _, err := c.ListBody(ctx, peer, corrupt); err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("corrupt body: %v", err)
	}

	// A wrong token is refused; so is a client with another CA.
	wrong := *cliCreds
	wrong.Token = strings.Repeat("0", 64)
	if _, err := internalapi.NewClient(&wrong).Status(ctx, peer); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong token: %v", err)
	}
	otherCreds, _ := internalapi.LoadCredentials(internalapi.Files{}, []byte("ffffffffffffffffffffffffffffffff"))
	otherCreds.Token = cliCreds.Token
	if _, err := internalapi.NewClient(otherCreds).Status(ctx, peer); err == nil {
		t.Fatal("a client with another CA trusted the server")
	}
	// Plain HTTP is not served.
	if resp, err := http.Get("http://" + peer + "/internal/status"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP answered")
		}
	}
}
