package guide_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/settings"
)

// instruction is one Containerfile instruction (continuation lines joined).
type instruction struct {
	line int
	cmd  string // upper case
	args string
}

// parseContainerfile splits a Containerfile into instructions; comments and
// blank lines are dropped, backslash continuations joined.
func parseContainerfile(text string) []instruction {
	var out []instruction
	var cur strings.Builder
	start := 0
	for i, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(l)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		} else if strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued RUN
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

// TestContainerfile checks packaging/Containerfile where no container
// engine runs: a Go build stage on go.mod's Go version, a small final
// stage as a non-root user, the ports and config of the guide, and only
// settings the server knows in ENV.
func TestContainerfile(t *testing.T) {
	repo, _ := filepath.Abs(filepath.Join("..", ".."))
	path := filepath.Join(repo, "packaging", "Containerfile")
	text := readFile(t, path)
	ins := parseContainerfile(text)

	var stages [][]instruction
	for _, in := range ins {
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("line %d: %s before the first FROM", in.line, in.cmd)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	if len(stages) < 2 {
		t.Fatalf("%d stages: want a build stage and a run stage", len(stages))
	}

	// The build stage's Go is go.mod's (major.minor).
	goMod := readFile(t, filepath.Join(repo, "go.mod"))
	gm := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(goMod)
	if gm == nil {
		t.Fatal("go.mod has no go directive")
	}
	build := stages[0][0].args
	if !regexp.MustCompile(`golang:` + regexp.QuoteMeta(gm[1]) + `\b`).MatchString(build) {
		t.Errorf("build stage FROM %q: want golang:%s (go.mod)", build, gm[1])
	}
	buildName := ""
	if f := strings.Fields(build); len(f) == 3 && strings.EqualFold(f[1], "AS") {
		buildName = f[2]
	} else {
		t.Errorf("build stage FROM %q has no AS name", build)
	}
	// The version stamp is the Makefile's.
	mk := readFile(t, filepath.Join(repo, "Makefile"))
	const stamp = "-X github.com/svcdns/svc/internal/version.Version="
	if !strings.Contains(text, stamp) || !strings.Contains(mk, stamp) {
		t.Errorf("the Containerfile and the Makefile must stamp the version the same way (%s)", stamp)
	}
	if !strings.Contains(text, "CGO_ENABLED=0") {
		t.Error("the build must be static (CGO_ENABLED=0): the run stage has no C library")
	}

	final := stages[len(stages)-1]
	from := final[0].args
	if !strings.Contains(from, "distroless") && !regexp.MustCompile(`debian:[a-z]+-slim`).MatchString(from) {
		t.Errorf("run stage FROM %q: want distroless or debian-slim", from)
	}
	got := map[string][]string{}
	for _, in := range final {
		got[in.cmd] = append(got[in.cmd], in.args)
	}
	users := got["USER"]
	if len(users) == 0 {
		if !strings.HasSuffix(from, ":nonroot") {
			t.Error("run stage sets no USER (and its base is not a nonroot image)")
		}
	} else if u := users[len(users)-1]; u == "0" || strings.HasPrefix(u, "root") || strings.HasPrefix(u, "0:") {
		t.Errorf("run stage USER %q is root", u)
	}
	expose := strings.Join(got["EXPOSE"], " ")
	for _, p := range []string{"53/udp", "53/tcp", "8443"} {
		if !strings.Contains(expose, p) {
			t.Errorf("EXPOSE %q lacks %s", expose, p)
		}
	}
	copiesBinary := false
	for _, c := range got["COPY"] {
		if strings.Contains(c, "--from="+buildName) && strings.Contains(c, "/usr/local/bin/svc") {
			copiesBinary = true
		}
	}
	if !copiesBinary {
		t.Errorf("run stage does not COPY --from=%s the binary", buildName)
	}
	entry := strings.Join(append(got["ENTRYPOINT"], got["CMD"]...), " ")
	if !strings.Contains(entry, `"/usr/local/bin/svc"`) || !strings.Contains(entry, `"serve", "--config", "/etc/service/service.yaml"`) {
		t.Errorf("ENTRYPOINT/CMD %q: want /usr/local/bin/svc serve --config /etc/service/service.yaml", entry)
	}
	if hc := strings.Join(got["HEALTHCHECK"], " "); !strings.Contains(hc, `"health", "--ready"`) {
		t.Errorf("HEALTHCHECK %q: want svc health --ready", hc)
	}

	// Files of the repository the build copies exist.
	for _, m := range regexp.MustCompile(`\bpackaging/[\w./-]+`).FindAllString(text, -1) {
		if _, err := os.Stat(filepath.Join(repo, m)); err != nil {
			t.Errorf("the Containerfile uses %s: %v", m, err)
		}
	}
	// The baked-in config with the image's ENV loads, and svc health's
	// default ops address is the config's (the HEALTHCHECK passes no flag).
	environ := []string{}
	for _, e := range got["ENV"] {
		environ = append(environ, strings.Fields(e)...)
	}
	mgr, err := settings.Load(context.Background(), settings.Options{
		ConfigPath: filepath.Join(repo, "packaging", "service.yaml"), ConfigPathExplicit: true, Environ: environ})
	if err != nil {
		t.Fatalf("packaging/service.yaml with the image's ENV %v: %v", environ, err)
	}
	if ops := mgr.Effective(true)["listeners.ops.address"]; ops != "127.0.0.1:8081" {
		t.Errorf("listeners.ops.address = %v: the HEALTHCHECK's svc health asks 127.0.0.1:8081", ops)
	}
	if _, err := os.Stat(filepath.Join(repo, "packaging", "Containerfile.dockerignore")); err != nil {
		t.Errorf("packaging/Containerfile.dockerignore (keeps .git, .run and bin out of the build context): %v", err)
	}
}

// containerEngine returns a container engine that answers, or why none does.
func containerEngine() (string, string) {
	var why []string
	for _, e := range []string{"docker", "podman"} {
		bin, err := exec.LookPath(e)
		if err != nil {
			why = append(why, e+" not installed")
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := exec.CommandContext(ctx, bin, "info").CombinedOutput()
		cancel()
		if err != nil {
			why = append(why, e+" info: "+firstLine(strings.TrimSpace(lastLines(string(out), 1))))
			continue
		}
		return bin, ""
	}
	return "", strings.Join(why, "; ")
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// TestContainerImage builds the image and asks it a DNS question, where a
// container engine answers (docs/admin-guide.md says how to do it by hand).
func TestContainerImage(t *testing.T) {
	engine, why := containerEngine()
	if engine == "" {
		t.Skipf("no container engine answers (%s): TestContainerfile checked the file only", why)
	}
	repo, _ := filepath.Abs(filepath.Join("..", ".."))
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	tag := "svc-guide-test:" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, engine, "build", "-f", "packaging/Containerfile", "-t", tag, repo).CombinedOutput()
	if err != nil {
		if regexp.MustCompile(`(?i)pull|registry|resolve|dial tcp|no such host|TLS handshake`).Match(out) {
			t.Skipf("%s build could not fetch a base image (offline?): %s", engine, lastLines(string(out), 3))
		}
		t.Fatalf("%s build: %v\n%s", engine, err, lastLines(string(out), 40))
	}
	t.Cleanup(func() { _ = exec.Command(engine, "rmi", "-f", tag).Run() })
	name := "svc-guide-test-" + hex.EncodeToString(b)
	out, err = exec.CommandContext(ctx, engine, "run", "-d", "--name", name, "-p", "127.0.0.1::53/udp", tag).CombinedOutput()
	if err != nil {
		t.Fatalf("%s run: %v\n%s", engine, err, out)
	}
	t.Cleanup(func() { _ = exec.Command(engine, "rm", "-f", name).Run() })
	out, err = exec.CommandContext(ctx, engine, "port", name, "53/udp").CombinedOutput()
	if err != nil {
		t.Fatalf("%s port: %v\n%s", engine, err, out)
	}
	host, port, _ := strings.Cut(strings.TrimSpace(firstLine(string(out))), ":")
	var last string
	for i := 0; i < 60; i++ {
		o, _ := exec.Command("dig", "+short", "+time=1", "+tries=1", "@"+host, "-p", port, "health.service.internal", "TXT").CombinedOutput()
		if last = strings.TrimSpace(string(o)); last == `"ok"` {
			logs, _ := exec.Command(engine, "logs", name).CombinedOutput()
			if !strings.Contains(string(logs), "Generated password") {
				t.Errorf("the container's log has no generated password (the guide's docker logs step):\n%s", logs)
			}
			return
		}
		time.Sleep(time.Second)
	}
	logs, _ := exec.Command(engine, "logs", name).CombinedOutput()
	t.Fatalf("the container did not answer the health name on port 53 within 60s (last %q):\n%s", last, logs)
}
