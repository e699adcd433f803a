package cli

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/svcdns/svc/internal/api"
)

func newRecordsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "records", Short: "Add, list and remove records of a zone"}
	var ttl int64
	var comment, recordSet, setID string
	add := &cobra.Command{
		Use:   "add ZONE NAME TYPE TARGET...",
		Short: "Add records (name relative to the zone, @ for the apex, or absolute with a trailing dot)",
		Long: "Adds targets to the endpoint NAME TYPE of the record set api-<zone> (or --record-set). Every target is parsed as the " +
			"data plane parses it before anything is stored: an unknown type, a bad address, an MX without a preference, " +
			"a name with blanks or outside the zone is refused (exit 1) with the field, the value and an example " +
			"(MX: \"10 mail.example.com.\", SRV: \"10 5 5060 sip.example.com.\").",
		Example: "  svc records add example.com www A 192.0.2.10 192.0.2.11\n  svc records add example.com @ MX \"10 mail.example.com.\"\n" +
			"  svc records add example.com @ TXT \"v=spf1 -all\" --ttl 3600",
		Args: cobra.MinimumNArgs(4),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.RecordsRequest{Name: args[1], Type: strings.ToUpper(args[2]), Targets: args[3:],
				Comment: comment, RecordSet: recordSet, SetIdentifier: setID, Namespace: a.namespace()}
			if cmd.Flags().Changed("ttl") {
				req.TTL = &ttl
			}
			var res api.ApplyResult
			if err := a.call(cmd.Context(), request{method: http.MethodPost, path: "/zones/" + url.PathEscape(args[0]) + "/records", body: req, out: &res}); err != nil {
				return err
			}
			return a.printApplyResults([]api.ApplyResult{res})
		},
	}
	add.Flags().Int64Var(&ttl, "ttl", 0, "record TTL in seconds (default: the zone's defaultTTL)")
	add.Flags().StringVar(&comment, "comment", "", "comment stored with the record")
	add.Flags().StringVar(&recordSet, "record-set", "", "DNSRecordSet to write (default api-<zone>)")
	add.Flags().StringVar(&setID, "set-identifier", "", "set identifier of the endpoint")

	var rmSet, rmID string
	rm := &cobra.Command{
		Use:   "rm ZONE NAME TYPE [TARGET]",
		Short: "Remove records (all targets, or only TARGET)",
		Args:  cobra.RangeArgs(3, 4),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := queryValues("name", args[1], "type", strings.ToUpper(args[2]), "recordSet", rmSet, "setIdentifier", rmID, "namespace", a.namespace())
			if len(args) == 4 {
				q.Set("target", args[3])
			}
			var res api.ApplyResult
			if err := a.call(cmd.Context(), request{method: http.MethodDelete, path: "/zones/" + url.PathEscape(args[0]) + "/records", query: q, out: &res}); err != nil {
				return err
			}
			return a.printApplyResults([]api.ApplyResult{res})
		},
	}
	rm.Flags().StringVar(&rmSet, "record-set", "", "DNSRecordSet to change (default api-<zone>)")
	rm.Flags().StringVar(&rmID, "set-identifier", "", "set identifier of the endpoint")

	list := &cobra.Command{
		Use:   "list ZONE",
		Short: "List the records of a zone from every record set",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, sets, err := a.listAll(cmd.Context(), "DNSRecordSet")
			if err != nil {
				return err
			}
			type row struct {
				RecordSet string   `json:"recordSet"`
				Namespace string   `json:"namespace"`
				Name      string   `json:"name"`
				Type      string   `json:"type"`
				TTL       *int64   `json:"ttl,omitempty"`
				Targets   []string `json:"targets"`
				SetID     string   `json:"setIdentifier,omitempty"`
			}
			var rows []row
			for _, s := range sets {
				spec, _ := s["spec"].(map[string]any)
				zr, _ := spec["zoneRef"].(map[string]any)
				if zr["name"] != args[0] {
					continue
				}
				eps, _ := spec["endpoints"].([]any)
				for _, e := range eps {
					ep, _ := e.(map[string]any)
					r := row{RecordSet: nameOf(s), Namespace: namespaceOf(s)}
					r.Name, _ = ep["dnsName"].(string)
					r.Type, _ = ep["recordType"].(string)
					r.SetID, _ = ep["setIdentifier"].(string)
					if t, ok := ep["recordTTL"].(float64); ok {
						v := int64(t)
						r.TTL = &v
					}
					ts, _ := ep["targets"].([]any)
					for _, t := range ts {
						r.Targets = append(r.Targets, fmt.Sprint(t))
					}
					rows = append(rows, r)
				}
			}
			if rows == nil {
				rows = []row{}
			}
			if ok, err := writeData(a.stdout, a.g.Output, rows); ok {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "NAME\tTYPE\tTTL\tTARGETS\tRECORDSET")
			for _, r := range rows {
				ttl := "-"
				if r.TTL != nil {
					ttl = fmt.Sprint(*r.TTL)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s/%s\n", r.Name, r.Type, ttl, strings.Join(r.Targets, ","), r.Namespace, r.RecordSet)
			}
			return tw.Flush()
		},
	}
	cmd.AddCommand(add, list, rm)
	return cmd
}
