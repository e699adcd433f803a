package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcdns/svc/internal/auth"
)

// readmeRecipe returns the shell blocks that follow the token-recipe marker
// of README.md: the server's terminal, then the client's.
func readmeRecipe(t *testing.T) (server, client string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- token-recipe")
	if !ok {
		t.Fatal("README.md has no <!-- token-recipe --> marker before the bootstrap token recipe")
	}
	var blocks []string
	for len(blocks) < 2 {
		_, after, ok := strings.Cut(rest, "```sh\n")
		if !ok {
			t.Fatal("README.md: fewer than two sh blocks after the token-recipe marker")
		}
		body, tail, ok := strings.Cut(after, "```")
		if !ok {
			t.Fatal("README.md: unterminated sh block")
		}
		blocks, rest = append(blocks, body), tail
	}
	return blocks[0], blocks[1]
}

// TestReadmeTokenRecipe runs the README's bootstrap-token recipe exactly as
// written in a fresh checkout (no bin/svc yet), with a `make` whose build
// puts the test's svc in bin/ and whose run records the environment
// `make run` gets and starts the server with it. The old recipe,
// SERVICE_BOOTSTRAP_TOKEN=$(bin/svc token generate) before make run, gave
// an empty variable (bin/svc did not exist) that the shell did not even
// export. Then the client terminal's lines must yield the token the server
// installed: it lists zones.
func TestReadmeTokenRecipe(t *testing.T) {
	serverBlock, clientBlock := readmeRecipe(t)
	checkout := t.TempDir()
	shims := t.TempDir()
	makeShim := `#!/bin/sh
set -e
case "$1" in
build) mkdir -p bin && cp "$SVC_TEST_BIN" bin/svc ;;
run) env | grep '^SERVICE_BOOTSTRAP_TOKEN' > "$SVC_TEST_ENV" || true ;;
*) echo "make shim: unexpected target $1" >&2; exit 2 ;;
esac
`
	if err := os.WriteFile(filepath.Join(shims, "make"), []byte(makeShim), 0o755); err != nil {
		t.Fatal(err)
	}
	envFile := filepath.Join(t.TempDir(), "make-run.env")
	run := func(script string) string {
		t.Helper()
		cmd := exec.Command("sh", "-e", "-c", script)
		cmd.Dir = checkout
		cmd.Env = []string{"PATH=" + shims + ":" + os.Getenv("PATH"), "HOME=" + checkout,
			"SVC_TEST_BIN=" + svcBin, "SVC_TEST_ENV=" + envFile}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("README recipe failed: %v\n--- script\n%s--- output\n%s", err, script, out)
		}
		return string(out)
	}
	// Twice: the second `make run` of the same checkout must work too.
	for i := range 2 {
		run(serverBlock)
		env, err := os.ReadFile(envFile)
		if err != nil {
			t.Fatalf("run %d: make run was not reached: %v", i+1, err)
		}
		if !strings.Contains(string(env), "SERVICE_BOOTSTRAP_TOKEN") {
			t.Fatalf("run %d: make run got no SERVICE_BOOTSTRAP_TOKEN(_FILE) in its environment", i+1)
		}
	}
	env, _ := os.ReadFile(envFile)
	var serverEnv []string
	for _, l := range strings.Split(strings.TrimSpace(string(env)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		if k == "SERVICE_BOOTSTRAP_TOKEN_FILE" && !filepath.IsAbs(v) {
			v = filepath.Join(checkout, v)
		}
		serverEnv = append(serverEnv, k+"="+v)
	}
	// The client terminal: its export line gives the token.
	var export string
	for _, l := range strings.Split(clientBlock, "\n") {
		if strings.HasPrefix(l, "export ") {
			export = l
		}
	}
	if export == "" {
		t.Fatal("the client block exports nothing")
	}
	tok := strings.TrimSpace(run(export + "\nprintf '%s\\n' \"$SERVICE_TOKEN\""))
	if _, err := auth.ParseToken(tok); err != nil {
		t.Fatalf("the client terminal's SERVICE_TOKEN is not a token (%v): %q", err, tok)
	}
	// The server started with make run's environment accepts that token.
	s := startBinaryServer(t, serverEnv...)
	u := newUser(t, "SERVICE_SERVER="+s.URL, "SERVICE_TOKEN="+tok)
	u.ok("get", "zones")
}
