package cli

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/svcdns/svc/internal/api"
	"github.com/svcdns/svc/internal/settings"
	"github.com/svcdns/svc/internal/version"
)

type doctorCheck struct {
	Check   string `json:"check"`
	Status  string `json:"status"` // ok, warn, fail
	Message string `json:"message"`
}

func newDoctorCmd(a *app) *cobra.Command {
	var skipAPI, skipPorts bool
	var keepalived, vipRunDir string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check configuration, data directory, ports, API, token and diagnoses",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var checks []doctorCheck
			add := func(check, status, format string, args ...any) {
				checks = append(checks, doctorCheck{check, status, fmt.Sprintf(format, args...)})
			}
			mgr, err := settings.Load(cmd.Context(), settings.Options{ConfigPath: a.g.Config, ConfigPathExplicit: cmd.Flags().Changed("config"), Environ: os.Environ()})
			var eff map[string]any
			if err != nil {
				add("config", "fail", "%v", err)
			} else {
				add("config", "ok", "%s loads", mgr.ConfigPath())
				eff = mgr.Effective(true)
				dataDir, _ := effective(eff, "node.dataDir")
				checkDataDir(fmt.Sprint(dataDir), add)
				if !skipPorts {
					checkPorts(eff, add)
				}
			}
			if keepalived != "" {
				if _, err := os.Stat(keepalived); err != nil {
					add("vrrp", "fail", "%v", err)
				} else {
					add("vrrp", "ok", "%s present", keepalived)
				}
			}
			_ = vipRunDir
			if !skipAPI {
				a.doctorAPI(cmd, add)
			}
			fails := 0
			if ok, err := writeData(a.stdout, a.g.Output, checks); ok {
				if err != nil {
					return err
				}
			} else {
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 3, ' ', 0)
				fmt.Fprintln(tw, "CHECK\tSTATUS\tMESSAGE")
				for _, c := range checks {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Check, c.Status, c.Message)
				}
				_ = tw.Flush()
			}
			for _, c := range checks {
				if c.Status == "fail" {
					fails++
				}
			}
			if fails > 0 {
				return &exitError{code: 1, msg: fmt.Sprintf("%d checks failed", fails)}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&skipAPI, "skip-api", false, "do not contact the API")
	cmd.Flags().BoolVar(&skipPorts, "skip-ports", false, "do not check that listener ports are free")
	cmd.Flags().StringVar(&keepalived, "keepalived-config", "", "VRRP daemon configuration to check")
	cmd.Flags().StringVar(&vipRunDir, "vip-run-dir", "/run/service", "run directory of the VIP supervisor")
	return cmd
}

func checkDataDir(dir string, add func(string, string, string, ...any)) {
	st, err := os.Stat(dir)
	switch {
	case os.IsNotExist(err):
		add("dataDir", "warn", "%s does not exist yet (created at start)", dir)
		return
	case err != nil:
		add("dataDir", "fail", "%v", err)
		return
	case !st.IsDir():
		add("dataDir", "fail", "%s is not a directory", dir)
		return
	}
	f, err := os.CreateTemp(dir, ".doctor-*")
	if err != nil {
		add("dataDir", "fail", "%s is not writable: %v", dir, err)
		return
	}
	f.Close()
	os.Remove(f.Name())
	add("dataDir", "ok", "%s writable", filepath.Clean(dir))
}

// checkPorts tries to bind the TCP listener addresses of the config.
// effective reads a key of settings.Manager.Effective, whose map is keyed
// by the whole dotted path (a nested lookup found nothing: the dataDir and
// ports checks checked nothing).
func effective(eff map[string]any, key string) (any, bool) {
	if v, ok := eff[key]; ok {
		return v, true
	}
	return lookupPath(eff, key)
}

func checkPorts(eff map[string]any, add func(string, string, string, ...any)) {
	var addrs []string
	for _, k := range []string{"listeners.api.address", "listeners.ops.address", "listeners.metrics.address", "listeners.internal.address"} {
		if v, ok := effective(eff, k); ok && fmt.Sprint(v) != "" {
			addrs = append(addrs, fmt.Sprint(v))
		}
	}
	if l, ok := effective(eff, "listeners.dns"); ok {
		items, _ := l.([]any)
		for _, it := range items {
			m, _ := it.(map[string]any)
			if s, _ := m["address"].(string); s != "" {
				addrs = append(addrs, s)
			}
		}
	}
	var busy []string
	for _, addr := range addrs {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			busy = append(busy, fmt.Sprintf("%s (%v)", addr, shortErr(err)))
			continue
		}
		ln.Close()
	}
	if len(busy) > 0 {
		add("ports", "warn", "not free (a running node holds them, or no permission): %s", strings.Join(busy, ", "))
		return
	}
	add("ports", "ok", "%d listener addresses free", len(addrs))
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

func (a *app) doctorAPI(cmd *cobra.Command, add func(string, string, string, ...any)) {
	c, err := a.client()
	if err != nil {
		add("api", "fail", "%v", err)
		return
	}
	ctx := cmd.Context()
	var v version.Info
	if err := c.Do(ctx, request{method: http.MethodGet, path: "/version", out: &v, noToken: true}); err != nil {
		add("api", "fail", "%s: %v", c.Server, err)
		return
	}
	add("api", "ok", "%s answers, version %s", c.Server, v.Version)
	if c.Token == "" {
		add("token", "warn", "no token: log in with `svc login`")
		return
	}
	var me api.MeBody
	if err := c.Do(ctx, request{method: http.MethodGet, path: "/auth/me", out: &me}); err != nil {
		add("token", "fail", "%v", err)
		return
	}
	add("token", "ok", "authenticated as %s %s", me.Principal.Kind, me.Principal.Name)
	var msgs api.ListBody[api.DiagnosisMessage]
	if err := c.Do(ctx, request{method: http.MethodGet, path: "/info/messages", out: &msgs}); err != nil {
		add("diagnoses", "warn", "%v", err)
		return
	}
	errs := 0
	for _, m := range msgs.Items {
		st := "warn"
		if m.Severity == "error" {
			st = "fail"
			errs++
		}
		if m.Severity != "info" {
			add("diagnoses", st, "%s: %s", m.Reason, m.Message)
		}
	}
	if errs == 0 {
		add("diagnoses", "ok", "%d messages, none an error", len(msgs.Items))
	}
}
