package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/svcdns/svc/internal/doctor"
	"github.com/svcdns/svc/internal/vip"
)

// vipFlags are the flags render and run share.
type vipFlags struct {
	vips          []string
	peers         []string
	peersFile     string
	peersFrom     string
	self          string
	priorityIndex int
	preemptDelay  time.Duration
	hmacKeyFile   string
	legacy        bool
	dns           []string
	probeTimeout  time.Duration
	requireBack   int
	runDir        string
	track         string
}

func (f *vipFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringArrayVar(&f.vips, "vip", nil, "virtual address name=addr/len@iface#vrid (repeatable; the same set on every node), e.g. dns-a=192.0.2.53/24@eth0#53")
	fl.StringSliceVar(&f.peers, "peers", nil, "unicast addresses of the nodes (comma-separated or repeated; this node's own may be included)")
	fl.StringVar(&f.peersFile, "peers-file", "", "file with one node address per line ('#' comments); run reloads keepalived when it changes")
	fl.StringVar(&f.peersFrom, "peers-from", "static", "where peers come from: static (--peers, --peers-file) or kubernetes[:NAMESPACE/LABEL_SELECTOR] (host IPs of the data-plane DaemonSet's pods; default namespace $POD_NAMESPACE, selector app.kubernetes.io/component=dataplane)")
	fl.StringVar(&f.self, "self", "", "this node's unicast source address (default: the peer that is an address of this host)")
	fl.IntVar(&f.priorityIndex, "priority-index", -1, "this node's position among the nodes, which VIPs prefer it (default -1: its position in the sorted peer addresses)")
	fl.DurationVar(&f.preemptDelay, "preempt-delay", 10*time.Second, "how long a recovered node waits before taking its preferred VIPs back (whole seconds, 0s..1000s)")
	fl.StringVar(&f.hmacKeyFile, "hmac-key-file", "/run/secrets/vrrp_hmac_{vrid}", "key authenticating adverts, per VRID ({vrid} is replaced); the same on every node, at least 16 bytes")
	fl.BoolVar(&f.legacy, "legacy", false, "no advert authentication (any host on the segment can take the VIPs)")
	fl.StringSliceVar(&f.dns, "dns", []string{"127.0.0.1:53"}, "local DNS addresses the track script probes")
	fl.DurationVar(&f.probeTimeout, "probe-timeout", 900*time.Millisecond, "time limit of each track script probe (below keepalived's 1 s interval)")
	fl.IntVar(&f.requireBack, "require-backends", 1, "how many of --dns must answer the health name for this node to keep its VIPs")
	fl.StringVar(&f.runDir, "run-dir", "/run/service", "directory of the rendered config, pid, drain, fifo and state files")
	fl.StringVar(&f.track, "track", vip.TrackFile, "how DNS health reaches keepalived: file (svc vip run probes every 500ms and writes a file keepalived tracks) or script (keepalived runs svc vip probe every second)")
}

// options turns the flags into render options (peers come from source).
func (f *vipFlags) options() (vip.Options, vip.PeerSource, bool, error) {
	var o vip.Options
	for _, s := range f.vips {
		v, err := vip.ParseVIP(s)
		if err != nil {
			return o, nil, false, err
		}
		o.VIPs = append(o.VIPs, v)
	}
	if len(o.VIPs) == 0 {
		return o, nil, false, errors.New("no --vip: give at least one, e.g. --vip dns-a=192.0.2.53/24@eth0#53")
	}
	fixed := false
	if f.self != "" {
		a, err := netip.ParseAddr(f.self)
		if err != nil {
			return o, nil, false, fmt.Errorf("--self %q: %v", f.self, err)
		}
		o.Self, fixed = a, true
	}
	var src vip.PeerSource
	switch {
	case f.peersFrom == "" || f.peersFrom == "static":
		if len(f.peers) == 0 && f.peersFile == "" {
			return o, nil, false, errors.New("no peers: give --peers, --peers-file or --peers-from kubernetes")
		}
		src = vip.StaticPeers(f.peers, f.peersFile)
	case f.peersFrom == "kubernetes" || strings.HasPrefix(f.peersFrom, "kubernetes:"):
		if len(f.peers) > 0 || f.peersFile != "" {
			return o, nil, false, errors.New("--peers-from kubernetes takes the peers from the cluster: drop --peers and --peers-file")
		}
		s, err := vip.KubePeers(strings.TrimPrefix(strings.TrimPrefix(f.peersFrom, "kubernetes"), ":"))
		if err != nil {
			return o, nil, false, err
		}
		src = s
	default:
		return o, nil, false, fmt.Errorf("--peers-from %q: want static or kubernetes[:NAMESPACE/LABEL_SELECTOR]", f.peersFrom)
	}
	svc, err := os.Executable()
	if err != nil {
		return o, nil, false, fmt.Errorf("locating the svc binary for keepalived's scripts: %w", err)
	}
	if svc, err = filepath.EvalSymlinks(svc); err != nil {
		return o, nil, false, err
	}
	runDir, err := filepath.Abs(f.runDir)
	if err != nil {
		return o, nil, false, err
	}
	o.PriorityIndex, o.PreemptDelay, o.KeyFile, o.Legacy = f.priorityIndex, f.preemptDelay, f.hmacKeyFile, f.legacy
	o.RunDir, o.Svc, o.Track = runDir, svc, f.track
	o.Probe = vip.Probe{DNS: f.dns, Timeout: f.probeTimeout, RequireBackends: f.requireBack}
	return o, src, fixed, nil
}

// signalContext ends on SIGTERM or SIGINT, as a supervisor must.
func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
}

func (a *app) vipLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(a.stderr, nil))
}

// newVIPCmd is `svc vip` (issue #26): render and run a keepalived VRRP supervisor.
func newVIPCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "vip",
		Short: "Supervisor of a VRRP daemon (keepalived) that gives the DNS service a stable address",
		Long: "Keeps DNS server addresses (VIPs) alive when a node dies: keepalived on every node, one VRRP\n" +
			"instance per --vip, unicast adverts to the peers, priorities that spread the VIPs over the\n" +
			"nodes, and a track script (svc vip probe) that gives a node's VIPs away when its DNS stops\n" +
			"answering. See docs/vip.md.",
	}
	cmd.AddCommand(newVIPRenderCmd(a), newVIPRunCmd(a), newVIPDrainCmd(a), newVIPRebalanceCmd(a),
		newVIPFifoCmd(a), newVIPProbeCmd(a))
	return cmd
}

func newVIPRenderCmd(a *app) *cobra.Command {
	var f vipFlags
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Print the keepalived configuration this node would run",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, src, fixed, err := f.options()
			if err != nil {
				return err
			}
			if o.Peers, err = src(cmd.Context()); err != nil {
				return err
			}
			if !fixed {
				if o.Self, err = vip.DetectSelf(o.Peers, o.VIPs); err != nil {
					return fmt.Errorf("%w (or give --self)", err)
				}
			}
			conf, _, err := vip.Render(o, nil)
			if err != nil {
				return err
			}
			_, err = a.stdout.Write(conf)
			return err
		},
	}
	f.add(cmd)
	return cmd
}

func newVIPRunCmd(a *app) *cobra.Command {
	var f vipFlags
	var health, keepalived string
	var stopTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Render, check and run keepalived; reload it on peer changes, restart it with backoff",
		Long: "Renders the configuration into --run-dir, checks it with keepalived --config-test, runs\n" +
			"keepalived in the foreground, renders again every few seconds (a peer change reloads\n" +
			"keepalived with SIGHUP after a check), restarts it with backoff when it exits, and stops it\n" +
			"on SIGTERM (keepalived then hands its VIPs over at once) within --stop-timeout. Health on\n" +
			"--health-address: /healthz, /status (JSON) and /metrics.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, src, fixed, err := f.options()
			if err != nil {
				return err
			}
			ctx, cancel := signalContext(cmd.Context())
			defer cancel()
			s := &vip.Supervisor{Options: o, PeerSource: src, FixedSelf: fixed, Keepalived: keepalived,
				StopTimeout: stopTimeout, HealthAddress: health, Log: a.vipLogger()}
			if strings.HasPrefix(f.peersFrom, "kubernetes") {
				s.PeerInterval = 10 * time.Second
			}
			return s.Run(ctx)
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&health, "health-address", ":8085", "address of /healthz, /status and /metrics (\"\" none)")
	cmd.Flags().DurationVar(&stopTimeout, "stop-timeout", 15*time.Second, "how long keepalived gets to stop on SIGTERM before it is killed")
	cmd.Flags().StringVar(&keepalived, "keepalived", "keepalived", "keepalived binary")
	return cmd
}

func newVIPDrainCmd(a *app) *cobra.Command {
	var runDir string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "drain",
		Short: "Move this node's VIPs to the other nodes (before maintenance); rebalance undoes it",
		Long: "Puts this node's VRRP instances in FAULT through the drain file keepalived tracks, so that\n" +
			"each VIP this node holds moves to a backup at once, waits until none is held here, then\n" +
			"leaves the node a backup below every serving node (it takes a VIP only when no other node\n" +
			"can). The drain lasts until svc vip rebalance, across restarts.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if err := vip.Drain(ctx, runDir); err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, "drained: this node holds no VIP")
			return nil
		},
	}
	cmd.Flags().StringVar(&runDir, "run-dir", "/run/service", "run directory of svc vip run")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the VIPs to leave")
	return cmd
}

func newVIPRebalanceCmd(a *app) *cobra.Command {
	var runDir string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "rebalance",
		Short: "End a drain and wait until this node holds the VIPs it is the first choice for",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if err := vip.Rebalance(ctx, runDir); err != nil {
				return fmt.Errorf("%w (a longer --timeout than the peers' --preempt-delay may help)", err)
			}
			st, err := vip.ReadStatus(runDir)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "rebalanced: this node holds %s\n", vipList(st.Masters()))
			return nil
		},
	}
	cmd.Flags().StringVar(&runDir, "run-dir", "/run/service", "run directory of svc vip run")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the preferred VIPs to come back")
	return cmd
}

// vipList names addresses, or says there are none.
func vipList(s []string) string {
	if len(s) == 0 {
		return "no VIP"
	}
	return strings.Join(s, ", ")
}

// probeWhy is the last probe failure, or why there is none to show.
func probeWhy(s string) string {
	if s == "" {
		return "no probe failure recorded"
	}
	return s
}

func newVIPFifoCmd(a *app) *cobra.Command {
	var runDir string
	cmd := &cobra.Command{
		Use:   "fifo [FIFO]",
		Short: "Read keepalived's notify fifo: log state changes, keep the state file, Kubernetes Events",
		Long: "keepalived starts it (vrrp_notify_fifo_script) with the fifo's path as last argument\n" +
			"(default: vip.fifo in --run-dir). Each state change is logged, written to vip-state.json\n" +
			"in --run-dir (svc health --vrrp, drain, rebalance and /metrics read it) and, in a pod\n" +
			"(POD_NAME and POD_NAMESPACE set), recorded as an Event on the pod.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := filepath.Join(runDir, vip.FifoFile)
			if len(args) == 1 {
				path = args[0]
			}
			ctx, cancel := signalContext(cmd.Context())
			defer cancel()
			log := a.vipLogger()
			return vip.ServeFifo(ctx, log, runDir, path, vip.KubeEvents(log))
		},
	}
	cmd.Flags().StringVar(&runDir, "run-dir", "/run/service", "run directory of svc vip run")
	return cmd
}

func newVIPProbeCmd(a *app) *cobra.Command {
	var p vip.Probe
	var runDir string
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Track script: succeed when the local DNS answers the health name (keepalived runs it every second)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := vip.RunProbe(cmd.Context(), p, runDir); err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, "ok")
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&p.DNS, "dns", []string{"127.0.0.1:53"}, "DNS addresses to ask for "+vip.HealthName+" TXT")
	cmd.Flags().DurationVar(&p.Timeout, "timeout", 900*time.Millisecond, "time limit of the probe")
	cmd.Flags().IntVar(&p.RequireBackends, "require-backends", 1, "how many of --dns must answer")
	cmd.Flags().StringVar(&runDir, "run-dir", "/run/service", "run directory where the last failure is kept for svc health --vrrp (\"\" none)")
	return cmd
}

// vrrpHealth reports the VRRP instances' states from the supervisor's run dir.
func vrrpHealth(ctx context.Context, a *app, runDir string) error {
	st, err := vip.ReadStatus(runDir)
	if err != nil {
		return fmt.Errorf("vrrp: %w", err)
	}
	if ok, err := writeData(a.stdout, a.g.Output, st); ok {
		if err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.stdout, "vrrp: keepalived %s, node %s, auth %s, drained %v\n", runningWord(st), st.Self, st.Auth, st.Drained)
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 3, ' ', 0)
		fmt.Fprintln(tw, "VIP\tADDRESS\tVRID\tPRIORITY\tPREFERRED\tSTATE\tSINCE")
		for _, in := range st.Instances {
			since := ""
			if !in.Since.IsZero() {
				since = in.Since.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%v\t%s\t%s\n", strings.TrimPrefix(in.Name, "svc_"), in.Address, in.VRID, in.Priority, in.Preferred, in.State, since)
		}
		_ = tw.Flush()
		if st.ProbeFailure != "" {
			fmt.Fprintf(a.stdout, "last probe failure: %s\n", st.ProbeFailure)
		}
	}
	if !st.Running {
		return fmt.Errorf("vrrp: %s", st.Error)
	}
	for _, in := range st.Instances {
		if in.State == "FAULT" && !st.Drained {
			return fmt.Errorf("vrrp: %s is in FAULT (the track script fails: %s)", in.Name, probeWhy(st.ProbeFailure))
		}
	}
	return nil
}

func runningWord(st vip.Status) string {
	if st.Running {
		return fmt.Sprintf("running (pid %d)", st.PID)
	}
	return "NOT running"
}

// doctorVRRP checks a keepalived configuration and the supervisor's run dir.
func doctorVRRP(ctx context.Context, rep *doctor.Report, config, runDir string) {
	if _, err := os.Stat(config); err != nil {
		rep.Add("vrrp", doctor.Fail, "%v", err)
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := vip.Check(cctx, nil, config); err != nil {
		rep.Add("vrrp", doctor.Fail, "%v", err)
	} else {
		rep.Add("vrrp", doctor.OK, "%s passes keepalived --config-test", config)
	}
	st, err := vip.ReadStatus(runDir)
	switch {
	case err != nil:
		rep.Add("vrrp/run-dir", doctor.Fail, "%v", err)
	case !st.Running:
		rep.Add("vrrp/run-dir", doctor.Fail, "%s: %s", runDir, st.Error)
	case st.Auth == "none":
		rep.Add("vrrp/run-dir", doctor.Warn, "keepalived runs (pid %d) with --legacy: adverts are not authenticated, any host on the segment can take the VIPs", st.PID)
	default:
		masters := st.Masters()
		rep.Add("vrrp/run-dir", doctor.OK, "keepalived runs (pid %d), %d VIPs, MASTER for %s", st.PID, len(st.Instances), vipList(masters))
	}
	if err == nil {
		for _, in := range st.Instances {
			if in.State == "FAULT" && !st.Drained {
				rep.Add("vrrp/"+strings.TrimPrefix(in.Name, "svc_"), doctor.Fail, "FAULT: the track script fails (%s)", probeWhy(st.ProbeFailure))
			}
		}
		if st.Drained {
			rep.Add("vrrp/drain", doctor.Warn, "this node is drained (svc vip rebalance ends it)")
		}
	}
}
