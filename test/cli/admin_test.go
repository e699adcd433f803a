package cli_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/api"
	"github.com/svcdns/svc/internal/store/sqlite"
	"github.com/svcdns/svc/internal/validation"
	"github.com/svcdns/svc/test/nodetest"
)

// startAdminSocket serves an API server's admin socket (the node does not
// serve it yet) and returns its path.
func startAdminSocket(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	v, err := validation.New()
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.NewStore(ctx, filepath.Join(dir, "state.db"), v, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "service.sock")
	srv, err := api.New(ctx, api.Options{DataDir: dir, NodeName: "node-a", GenerateKey: true, TLSAuto: "off",
		AdminSocketPath: sock, AdminSocketGroup: -1, Stdout: io.Discard,
		Env: func(k string) string {
			if k == "SERVICE_ADMIN_PASSWORD" {
				return adminPassword
			}
			return ""
		}}, api.Deps{Store: st, Kinds: v, Admitter: v})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeAdminSocket(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("admin socket did not stop")
		}
		srv.Close()
		st.Close()
	})
	nodetest.Eventually(t, 5*time.Second, "admin socket listening", func() bool {
		_, err := os.Stat(sock)
		return err == nil
	})
	return sock
}

func TestAdminSocket(t *testing.T) {
	sock := startAdminSocket(t)
	u := newUser(t, "SERVICE_ADMIN_SOCKET="+sock)
	for _, proto := range []string{"http", "ndjson", "auto"} {
		out := u.ok("admin", "list-users", "--protocol", proto)
		if !strings.Contains(out, "admin") || !strings.HasPrefix(out, "NAME") {
			t.Errorf("list-users over %s: %s", proto, out)
		}
	}
	out := u.ok("admin", "reset-password", "alice", "--create")
	if !strings.Contains(out, "password of alice created") || !strings.Contains(out, "generated password: ") {
		t.Errorf("reset-password --create: %s", out)
	}
	r := u.run("admin", "reset-password", "bob")
	if r.Code == 0 || !strings.Contains(r.Stderr, "not_found") {
		t.Errorf("reset-password of a missing user: %d %s", r.Code, r.Stderr)
	}
	r = u.runIn("short\n", "admin", "reset-password", "alice", "--password-stdin", "--protocol", "ndjson")
	if r.Code == 0 || !strings.Contains(r.Stderr, "invalid") {
		t.Errorf("short password: %d %s", r.Code, r.Stderr)
	}
	tok := strings.TrimSpace(u.ok("admin", "create-token", "--description", "break glass"))
	if !strings.HasPrefix(tok, "svc_") {
		t.Fatalf("create-token: %q", tok)
	}
	if r := u.run("admin", "list-users", "--socket", filepath.Join(t.TempDir(), "none.sock")); r.Code == 0 {
		t.Errorf("missing socket accepted")
	}
}
