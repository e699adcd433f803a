package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/svcdns/svc/internal/api"
)

func zonePath(zone, sub string) string { return "/zones/" + url.PathEscape(zone) + sub }

func newZonesCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "zones", Aliases: []string{"zone"}, Short: "Manage DNS zones"}
	list := &cobra.Command{
		Use: "list", Short: "List zones", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ki, items, err := a.listAll(cmd.Context(), "DNSZone")
			if err != nil {
				return err
			}
			return printObjects(a.stdout, a.g.Output, ki, items, false, false, time.Now())
		},
	}
	get := &cobra.Command{
		Use: "get ZONE", Short: "Show one zone", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ki, err := a.resolveKind("DNSZone")
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			obj, err := getObject(cmd.Context(), c, ki, "", args[0])
			if err != nil {
				return err
			}
			return printObjects(a.stdout, a.g.Output, ki, []map[string]any{obj}, false, true, time.Now())
		},
	}
	var dryRun bool
	del := &cobra.Command{
		Use: "delete ZONE", Short: "Delete a zone and every record set that references it", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var res api.ZoneDeleteResult
			q := url.Values{}
			if dryRun {
				q.Set("dryRun", "true")
			}
			if err := a.call(cmd.Context(), request{method: http.MethodDelete, path: zonePath(args[0], ""), query: q, out: &res}); err != nil {
				return err
			}
			if ok, err := writeData(a.stdout, a.g.Output, res); ok {
				return err
			}
			if dryRun {
				fmt.Fprintf(a.stdout, "dnszone/%s would be deleted with %d record sets (%d records)\n", args[0], res.RecordSets, res.Records)
				return nil
			}
			fmt.Fprintf(a.stdout, "dnszone/%s deleted with %d record sets (%d records)\n", args[0], res.RecordSets, res.Records)
			return nil
		},
	}
	del.Flags().BoolVar(&dryRun, "dry-run", false, "only count what would be deleted")
	var out string
	export := &cobra.Command{
		Use: "export ZONE", Short: "Print the zone as a BIND zone file", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var body []byte
			if err := a.call(cmd.Context(), request{method: http.MethodGet, path: zonePath(args[0], "/export"), header: http.Header{"Accept": {"text/dns"}}, out: &body}); err != nil {
				return err
			}
			if out != "" && out != "-" {
				if err := os.WriteFile(out, body, 0o644); err != nil {
					return fmt.Errorf("--out: %w", err)
				}
				fmt.Fprintf(a.stderr, "wrote %s\n", out)
				return nil
			}
			_, err := a.stdout.Write(body)
			return err
		},
	}
	export.Flags().StringVar(&out, "out", "", "write to this file instead of standard output")
	imp := newZoneImportCmd(a, "import ZONE -f FILE", "Import a BIND zone file into one record set of the zone", false)
	notify := &cobra.Command{
		Use: "notify ZONE", Short: "Send NOTIFY to the zone's secondaries", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var res map[string]any
			if err := a.call(cmd.Context(), request{method: http.MethodPost, path: zonePath(args[0], "/notify"), out: &res}); err != nil {
				return err
			}
			if ok, err := writeData(a.stdout, a.g.Output, res); ok {
				return err
			}
			return writeNotified(a.stdout, args[0], res)
		},
	}
	cmd.AddCommand(list, get, del, export, imp, notify)
	return cmd
}

// newZoneImportCmd is `zones import` and `import bind`.
func newZoneImportCmd(a *app, use, short string, withOrigin bool) *cobra.Command {
	var file, recordSet, origin string
	var updateZone, dryRun bool
	cmd := &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(1),
		Long: short + `.

The file's SOA and apex NS records become the zone's spec.soa and
spec.nameServers (their TTL its defaultTTL) when the import creates the zone
(--origin) or with --update-zone; an existing zone keeps its own otherwise.
An imported serial never goes backwards (RFC 1982): one older than the zone
serves is raised past it. The other records go into the record set
--record-set (default import-<zone>), continued in <set>-2, -3, ... when the
zone has more than 1000 names and types, all written in one transaction;
sets an earlier import filled and this one does not are removed.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return errors.New("-f is required")
			}
			var data []byte
			var err error
			if file == "-" {
				var buf bytes.Buffer
				_, err = buf.ReadFrom(a.stdin)
				data = buf.Bytes()
			} else {
				data, err = os.ReadFile(file)
			}
			if err != nil {
				return fmt.Errorf("-f: %w", err)
			}
			var res api.ZoneImportResult
			q := queryValues("recordSet", recordSet, "namespace", a.namespace(), "origin", origin)
			if updateZone {
				q.Set("updateZone", "true")
			}
			if dryRun {
				q.Set("dryRun", "true")
			}
			if err := a.call(cmd.Context(), request{method: http.MethodPost, path: zonePath(args[0], "/import"), query: q, body: data, ctype: "text/dns", out: &res}); err != nil {
				if withOrigin && origin == "" && isNotFound(err) {
					return fmt.Errorf("%w\nhint: DNSZone %s does not exist; pass --origin with the zone's DNS name (e.g. --origin %s.) to create it, or create it first with svc apply", err, args[0], args[0])
				}
				return err
			}
			return a.printZoneImport(&res)
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "zone file (- for standard input)")
	cmd.Flags().StringVar(&recordSet, "record-set", "", "DNSRecordSet to write (default import-<zone>; large zones continue in <set>-2, -3, ...)")
	cmd.Flags().BoolVar(&updateZone, "update-zone", false, "replace the existing zone's SOA, name servers and default TTL with the file's")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what the import would do and store nothing")
	if withOrigin {
		cmd.Flags().StringVar(&origin, "origin", "", "zone name; creates the DNSZone (with the file's SOA and NS) when it is missing")
	}
	return cmd
}

// printZoneImport prints one "kind/name result" line per object, then what
// was taken from the file; notes and warnings go to stderr.
func (a *app) printZoneImport(res *api.ZoneImportResult) error {
	for _, n := range res.Zone.Notes {
		fmt.Fprintf(a.stderr, "Note: %s\n", n)
	}
	for _, r := range res.RecordSets {
		for _, w := range r.Warnings {
			fmt.Fprintf(a.stderr, "Warning: %s\n", w)
		}
	}
	if ok, err := writeData(a.stdout, a.g.Output, res); ok {
		return err
	}
	z := res.Zone
	if a.g.Output == outName {
		fmt.Fprintf(a.stdout, "dnszone/%s\n", z.Name)
		for _, r := range res.RecordSets {
			fmt.Fprintf(a.stdout, "dnsrecordset/%s\n", r.Name)
		}
		return nil
	}
	fmt.Fprintf(a.stdout, "dnszone/%s %s\n", z.Name, z.Result)
	for _, r := range res.RecordSets {
		fmt.Fprintf(a.stdout, "dnsrecordset/%s %s\n", r.Name, r.Result)
	}
	if z.SOATaken && z.SOA != nil {
		s := z.SOA
		ttl := "defaultTTL"
		if s.TTL != nil {
			ttl = fmt.Sprint(*s.TTL)
		}
		fmt.Fprintf(a.stdout, "SOA from the file: %s %s serial %d refresh %d retry %d expire %d minimum %d TTL %s\n",
			s.MName, s.RName, s.Serial, s.Refresh, s.Retry, s.Expire, s.Minimum, ttl)
	}
	if z.NameServersTaken {
		ttl := ""
		if z.NameServerTTL != nil {
			ttl = fmt.Sprintf(" (TTL %d, the zone's defaultTTL)", *z.NameServerTTL)
		}
		fmt.Fprintf(a.stdout, "NS from the file: %s%s\n", strings.Join(z.NameServers, " "), ttl)
	}
	sets := 0
	for _, r := range res.RecordSets {
		if r.Result != "deleted" {
			sets++
		}
	}
	fmt.Fprintf(a.stdout, "%d names and types (%d records) in %d record sets\n", res.Endpoints, res.Records, sets)
	if res.DryRun {
		fmt.Fprintln(a.stdout, "dry run: nothing was stored")
	}
	return nil
}

func newImportCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "import", Short: "Import data from other formats"}
	cmd.AddCommand(newZoneImportCmd(a, "bind ZONE -f FILE", "Import a BIND zone file (--origin creates the zone if missing)", true))
	return cmd
}

// writeNotified prints what POST /zones/{zone}/notify answered: the serial
// and, per target, its answer (or why none came).
func writeNotified(w io.Writer, zone string, res map[string]any) error {
	sent, _ := res["sent"].([]any)
	if len(sent) == 0 {
		msg, _ := res["message"].(string)
		_, err := fmt.Fprintf(w, "dnszone/%s: no NOTIFY sent: %s\n", zone, msg)
		return err
	}
	fmt.Fprintf(w, "dnszone/%s serial %v: NOTIFY sent to %d targets\n", zone, res["serial"], len(sent))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tKEY\tANSWER\tATTEMPTS\tTOOK")
	for _, e := range sent {
		m, _ := e.(map[string]any)
		answer, _ := m["rcode"].(string)
		if answer == "" {
			answer, _ = m["error"].(string)
		}
		key, _ := m["key"].(string)
		if key == "" {
			key = "-"
		}
		fmt.Fprintf(tw, "%v\t%s\t%s\t%v\t%vms\n", m["target"], key, answer, m["attempts"], m["took_ms"])
	}
	return tw.Flush()
}
