package cli

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/svcdns/svc/internal/api"
)

// newUnblockCmd: `svc unblock list|get|approve|deny` over /unblockrequests.
func newUnblockCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "unblock", Short: "Unblock requests filed from the block page: list, approve, deny"}

	var phase, domain string
	var all bool
	list := &cobra.Command{
		Use: "list", Aliases: []string{"ls"}, Short: "List unblock requests (pending first)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if !all {
				q.Set("namespace", a.namespace())
			}
			if phase != "" {
				q.Set("phase", phase)
			}
			if domain != "" {
				q.Set("domain", domain)
			}
			q.Set("limit", "1000")
			var page api.UnblockRequestPage
			if err := a.call(cmd.Context(), request{method: http.MethodGet, path: "/unblockrequests", query: q, out: &page}); err != nil {
				return err
			}
			if ok, err := writeData(a.stdout, a.g.Output, page); ok || err != nil {
				return err
			}
			if a.g.Output == outName {
				for _, r := range page.Items {
					fmt.Fprintf(a.stdout, "unblockrequest/%s\n", r.Name)
				}
				return nil
			}
			if len(page.Items) == 0 {
				fmt.Fprintln(a.stderr, "no unblock requests")
				return nil
			}
			now := time.Now()
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 3, ' ', 0)
			head := "NAME\tDOMAIN\tPHASE\tCLIENT\tPOLICY\tAGE\tEXPIRES"
			if all {
				head = "NAMESPACE\t" + head
			}
			if a.g.Output == outWide {
				head += "\tDECIDED-BY\tSCOPE\tREASON"
			}
			fmt.Fprintln(tw, head)
			for _, r := range page.Items {
				row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", r.Name, r.Domain, r.Phase, dash(r.Requester.IP), dash(r.Policy),
					shortAge(now.Sub(r.CreatedAt)), untilText(r.ExpiresAt, now))
				if all {
					row = r.Namespace + "\t" + row
				}
				if a.g.Output == outWide {
					scope := r.Scope
					if len(r.Groups) > 0 {
						scope += ":" + strings.Join(r.Groups, ",")
					}
					row += fmt.Sprintf("\t%s\t%s\t%s", dash(r.DecidedBy), dash(scope), dash(clipLine(r.Reason, 60)))
				}
				fmt.Fprintln(tw, row)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if page.Pending > 0 {
				fmt.Fprintf(a.stderr, "%d pending\n", page.Pending)
			}
			return nil
		},
	}
	list.Flags().StringVar(&phase, "phase", "", "only this phase: pending, approved, denied, expired")
	list.Flags().StringVar(&domain, "domain", "", "only domains containing this text")
	list.Flags().BoolVarP(&all, "all-namespaces", "A", false, "every namespace")
	_ = list.RegisterFlagCompletionFunc("phase", cobra.FixedCompletions([]string{"pending", "approved", "denied", "expired"}, cobra.ShellCompDirectiveNoFileComp))

	get := &cobra.Command{
		Use: "get NAME", Short: "Show one unblock request (NAME or NAMESPACE/NAME)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r api.UnblockRequestInfo
			if err := a.call(cmd.Context(), request{method: http.MethodGet, path: a.unblockPath(args[0], ""), out: &r}); err != nil {
				return err
			}
			return a.printUnblock(r)
		},
	}

	var ap api.UnblockApproval
	var groups []string
	approve := &cobra.Command{
		Use:   "approve NAME",
		Short: "Approve a pending unblock request: an allow entry for everyone or client groups, exact or with subdomains, permanent or for a time",
		Example: `  svc unblock approve ads.example.com-3f9a1c0b
  svc unblock approve ads.example.com-3f9a1c0b --group kids --match subdomains --duration 24h --comment "for the school project"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := ap
			body.Groups = groups
			if len(groups) > 0 && body.Scope == "" {
				body.Scope = "groups"
			}
			if body.Duration != "" {
				if d, err := time.ParseDuration(body.Duration); err != nil || d <= 0 {
					return fmt.Errorf("--duration %q: expected a positive duration such as 24h, 90m or 7h30m", body.Duration)
				}
			}
			var r api.UnblockRequestInfo
			if err := a.call(cmd.Context(), request{method: http.MethodPost, path: a.unblockPath(args[0], "/approve"), body: body, out: &r}); err != nil {
				return err
			}
			if ok, err := writeData(a.stdout, a.g.Output, r); ok || err != nil {
				return err
			}
			until := "permanently"
			if r.ExpiresAt != nil {
				until = "until " + r.ExpiresAt.Local().Format(time.RFC3339)
			}
			who := "everyone"
			if r.Scope == "groups" {
				who = "groups " + strings.Join(r.Groups, ", ")
			}
			fmt.Fprintf(a.stdout, "unblockrequest/%s approved: %s (%s) for %s %s; allow entries in blocklist/%s\n", r.Name, r.Domain, r.Match, who, until, r.Entry)
			return nil
		},
	}
	af := approve.Flags()
	af.StringVar(&ap.Scope, "scope", "", "everyone (default) or groups (implied by --group)")
	af.StringSliceVar(&groups, "group", nil, "ClientGroup to unblock for (repeatable; NAME or NAMESPACE/NAME)")
	af.StringVar(&ap.Match, "match", "", "exact (default) or subdomains")
	af.StringVar(&ap.Duration, "duration", "", "unblock for this long, e.g. 24h (default permanent)")
	af.BoolVar(&ap.Permanent, "permanent", false, "permanent (the default; excludes --duration)")
	af.StringVar(&ap.Comment, "comment", "", "note recorded with the decision")
	_ = approve.RegisterFlagCompletionFunc("scope", cobra.FixedCompletions([]string{"everyone", "groups"}, cobra.ShellCompDirectiveNoFileComp))
	_ = approve.RegisterFlagCompletionFunc("match", cobra.FixedCompletions([]string{"exact", "subdomains"}, cobra.ShellCompDirectiveNoFileComp))

	var denyComment string
	deny := &cobra.Command{
		Use: "deny NAME", Short: "Deny a pending unblock request (recorded with who, when and why)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r api.UnblockRequestInfo
			if err := a.call(cmd.Context(), request{method: http.MethodPost, path: a.unblockPath(args[0], "/deny"), body: api.UnblockDenial{Comment: denyComment}, out: &r}); err != nil {
				return err
			}
			if ok, err := writeData(a.stdout, a.g.Output, r); ok || err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "unblockrequest/%s denied: %s\n", r.Name, r.Domain)
			return nil
		},
	}
	deny.Flags().StringVar(&denyComment, "comment", "", "why (recorded with the decision)")

	cmd.AddCommand(list, get, approve, deny)
	return cmd
}

// unblockPath is the route of request ref (NAME in the current namespace,
// or NAMESPACE/NAME) plus suffix.
func (a *app) unblockPath(ref, suffix string) string {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		ns, name = a.namespace(), ref
	}
	return "/unblockrequests/" + url.PathEscape(ns) + "/" + url.PathEscape(name) + suffix
}

func (a *app) printUnblock(r api.UnblockRequestInfo) error {
	if ok, err := writeData(a.stdout, a.g.Output, r); ok || err != nil {
		return err
	}
	if a.g.Output == outName {
		fmt.Fprintf(a.stdout, "unblockrequest/%s\n", r.Name)
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	ts := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.Local().Format(time.RFC3339)
	}
	row("Name", r.Namespace+"/"+r.Name)
	row("Domain", r.Domain)
	row("Phase", r.Phase)
	row("Reason", clipLine(r.Reason, 500))
	row("Client", r.Requester.IP)
	row("Client ID", r.Requester.ClientID)
	row("Contact", r.Requester.Contact)
	row("Policy", r.Policy)
	row("List", r.List)
	row("Rule", r.Rule)
	row("Filed", r.CreatedAt.Local().Format(time.RFC3339))
	if r.Submissions > 1 {
		row("Submissions", fmt.Sprint(r.Submissions))
	}
	row("Expires", ts(r.ExpiresAt))
	row("Decided by", r.DecidedBy)
	row("Decided at", ts(r.DecidedAt))
	row("Comment", r.Comment)
	if r.Scope != "" {
		scope := r.Scope
		if len(r.Groups) > 0 {
			scope += " (" + strings.Join(r.Groups, ", ") + ")"
		}
		row("Scope", scope)
		row("Match", r.Match)
		d := r.Duration
		if d == "" {
			d = "permanent"
		}
		row("Duration", d)
	}
	row("Allow list", r.Entry)
	row("Attached to", strings.Join(r.Policies, ", "))
	row("Status", r.Message)
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clipLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func untilText(t *time.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	if !t.After(now) {
		return "passed"
	}
	return "in " + shortAge(t.Sub(now))
}

// shortAge writes a duration as kubectl does: 45s, 12m, 5h, 3d.
func shortAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
