package edge

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// CheckConfig runs `dnsdist --check-config -C path`.
func CheckConfig(ctx context.Context, bin, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--check-config", "-C", path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("dnsdist --check-config %s: %w: %s", path, err, bytes.TrimSpace(out))
	}
	return nil
}

var versionRE = regexp.MustCompile(`dnsdist (\d+)\.(\d+)\.(\d+)`)

// DetectVersion asks the dnsdist binary for its version ("1.7.3").
func DetectVersion(ctx context.Context, bin string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w (is dnsdist installed? --dnsdist names the binary)", bin, err)
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s --version: no version in %q", bin, strings.TrimSpace(string(out)))
	}
	return fmt.Sprintf("%s.%s.%s", m[1], m[2], m[3]), nil
}

// RendererFor picks the configuration format dnsdist version v reads:
// YAML from 2.0 on, Lua before.
func RendererFor(v string) string {
	if strings.HasPrefix(v, "1.") || v == "" {
		return "lua"
	}
	return "yaml"
}
