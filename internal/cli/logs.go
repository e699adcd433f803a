package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

type logsOpts struct {
	client, clientID, domain, domainMatch, list, qtype, status, statusClass, upstream, zone, policy, since, until string
	limit                                                                                                         int
	follow, noHeaders                                                                                             bool
}

// logStatuses and logStatusClasses are the values GET /queries accepts
// (querylog.ParseFilter; TestLogStatusesAccepted keeps them in step), for
// a did-you-mean before the request.
var (
	logStatuses = []string{"answered", "cached", "stale", "blocked", "rewritten", "authoritative", "local",
		"control", "failed", "refused", "malformed", "dropped"}
	logStatusClasses = []string{"allowed", "blocked", "rewritten", "error"}
)

func checkChoice(flag, v string, choices []string) error {
	v = strings.ToLower(strings.TrimSpace(v))
	if v == "" || slices.Contains(choices, v) {
		return nil
	}
	return fmt.Errorf("%s %q: unknown value%s; one of %s", flag, v, didYouMean(v, choices), strings.Join(choices, ", "))
}

func (o *logsOpts) query() (map[string]string, error) {
	if err := checkChoice("--status", o.status, logStatuses); err != nil {
		return nil, err
	}
	if err := checkChoice("--status-class", o.statusClass, logStatusClasses); err != nil {
		return nil, err
	}
	// The parameter names of GET /queries and /queries/stream
	// (querylog.ParseFilter).
	q := map[string]string{"client": o.client, "client_id": o.clientID, "domain": o.domain, "domain_match": o.domainMatch, "list": o.list,
		"qtype": o.qtype, "status": o.status, "status_class": o.statusClass, "upstream": o.upstream,
		"zone": o.zone, "policy": o.policy}
	now := time.Now()
	for k, v := range map[string]string{"since": o.since, "until": o.until} {
		if v == "" {
			continue
		}
		t, err := parseSince(v, now)
		if err != nil {
			return nil, err
		}
		q[k] = t.UTC().Format(time.RFC3339)
	}
	return q, nil
}

var logColumns = []string{"TIME", "CLIENT", "DOMAIN", "TYPE", "STATUS", "RCODE", "LIST", "UPSTREAM", "MS"}

// wideLogColumns are -o wide's: the client ID the client declared (DoT,
// DoH, DoQ), the policy and the rule that decided.
var wideLogColumns = append(append([]string{}, logColumns...), "CLIENT-ID", "POLICY", "RULE")

func (a *app) logHeader() []string {
	if a.g.Output == outWide {
		return wideLogColumns
	}
	return logColumns
}

func (a *app) logRow(e map[string]any) []string {
	r := logRow(e)
	if a.g.Output == outWide {
		r = append(r, field(e, "client_id"), field(e, "policy"), field(e, "rule"))
	}
	return r
}

func field(e map[string]any, keys ...string) string {
	for _, k := range keys {
		if v, ok := e[k]; ok && v != nil && fmt.Sprint(v) != "" {
			return fmt.Sprint(v)
		}
	}
	return "-"
}

func logRow(e map[string]any) []string {
	get := func(keys ...string) string {
		for _, k := range keys {
			if v, ok := e[k]; ok && v != nil {
				return fmt.Sprint(v)
			}
		}
		return "-"
	}
	ms := get("latency_ms", "elapsed_ms")
	if f, ok := e["latency_ms"].(float64); ok {
		ms = strconv.FormatFloat(f, 'f', 1, 64)
	}
	return []string{get("ts", "time"), get("client"), get("domain", "name", "qname"), get("qtype", "type"),
		get("status"), get("rcode"), get("list"), get("upstream"), ms}
}

func newLogsCmd(a *app) *cobra.Command {
	o := &logsOpts{}
	cmd := &cobra.Command{
		Use:     "logs",
		Aliases: []string{"log", "querylog"},
		Short:   "Show the query log (-f follows the live stream)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			qm, err := o.query()
			if err != nil {
				return err
			}
			kv := []string{}
			for k, v := range qm {
				kv = append(kv, k, v)
			}
			q := queryValues(kv...)
			if o.follow {
				return a.followLogs(cmd.Context(), q, o.noHeaders)
			}
			if o.limit < 1 {
				return fmt.Errorf("--limit %d: at least 1", o.limit)
			}
			items, err := a.listQueries(cmd.Context(), q, o.limit)
			if err != nil {
				return err
			}
			if ok, err := writeData(a.stdout, a.g.Output, items); ok {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			if !o.noHeaders {
				fmt.Fprintln(tw, strings.Join(a.logHeader(), "\t"))
			}
			for _, e := range items {
				fmt.Fprintln(tw, strings.Join(a.logRow(e), "\t"))
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.client, "client", "", "client address, ID or name")
	f.StringVar(&o.clientID, "client-id", "", "client ID the client declared over DoT, DoH or DoQ (exact)")
	f.StringVar(&o.domain, "domain", "", "queried name")
	f.StringVar(&o.domainMatch, "domain-match", "", "how --domain matches: exact (default) or substring")
	f.StringVar(&o.list, "list", "", "list that decided, e.g. ns/name")
	f.StringVar(&o.policy, "policy", "", "policy that decided (namespace/name)")
	f.StringVar(&o.qtype, "qtype", "", "query type")
	f.StringVar(&o.status, "status", "", "answer status")
	f.StringVar(&o.statusClass, "status-class", "", "answer status class")
	f.StringVar(&o.upstream, "upstream", "", "upstream that answered")
	f.StringVar(&o.zone, "zone", "", "authoritative zone")
	f.StringVar(&o.since, "since", "", "RFC 3339 time or duration back from now")
	f.StringVar(&o.until, "until", "", "RFC 3339 time or duration back from now")
	f.IntVar(&o.limit, "limit", 50, "at most this many rows")
	f.BoolVarP(&o.follow, "follow", "f", false, "follow the live stream (Server-Sent Events)")
	f.BoolVar(&o.noHeaders, "no-headers", false, "print no header line")
	return cmd
}

// followLogs reads GET /queries/stream and reconnects after a drop, with
// backoff and Last-Event-ID, so that no event is lost or repeated (the node
// replays the stored rows after that id). Errors of the first connection and
// client errors (4xx) end the command.
func (a *app) followLogs(ctx context.Context, q url.Values, noHeaders bool) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	c.HTTP.Timeout = 0 // a stream has no end
	lastID := ""
	if !noHeaders && a.g.Output != outJSON {
		fmt.Fprintln(a.stdout, strings.Join(a.logHeader(), "\t"))
	}
	const minBackoff, maxBackoff = 500 * time.Millisecond, 10 * time.Second
	backoff := minBackoff
	connected := false
	for {
		hdr := http.Header{"Accept": {"text/event-stream"}}
		if lastID != "" {
			hdr.Set("Last-Event-ID", lastID)
		}
		res, err := c.Stream(ctx, request{method: http.MethodGet, path: "/queries/stream", query: q, header: hdr})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ae *APIError
			if !connected || (errors.As(err, &ae) && ae.Status < 500 && ae.Status != http.StatusTooManyRequests) {
				return err
			}
			fmt.Fprintf(a.stderr, "stream: %v; retrying in %s\n", err, backoff)
		} else {
			connected = true
			events := 0
			err = readSSE(res.Body, func(id, data string) {
				events++
				if id != "" {
					lastID = id
				}
				a.printLogEvent(data)
			})
			res.Body.Close()
			if ctx.Err() != nil {
				return nil
			}
			if events > 0 {
				backoff = minBackoff
			}
			if lastID != "" {
				fmt.Fprintf(a.stderr, "stream dropped (%v); resuming after event %s in %s\n", err, lastID, backoff)
			} else {
				fmt.Fprintf(a.stderr, "stream dropped (%v); reconnecting in %s\n", err, backoff)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// listQueries reads GET /queries page by page (at most 1000 rows a page;
// a filtered page may hold fewer rows and still carry continue) until limit
// rows or the last page.
func (a *app) listQueries(ctx context.Context, q url.Values, limit int) ([]map[string]any, error) {
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	items := []map[string]any{}
	for {
		q.Set("limit", strconv.Itoa(min(limit-len(items), 1000)))
		var page struct {
			Items    []map[string]any `json:"items"`
			Continue string           `json:"continue"`
		}
		if err := c.Do(ctx, request{method: http.MethodGet, path: "/queries", query: q, out: &page}); err != nil {
			return nil, err
		}
		items = append(items, page.Items...)
		if page.Continue == "" || len(items) >= limit {
			return items, nil
		}
		q.Set("continue", page.Continue)
	}
}

func (a *app) printLogEvent(data string) {
	if a.g.Output == outJSON {
		fmt.Fprintln(a.stdout, data)
		return
	}
	var e map[string]any
	if err := json.Unmarshal([]byte(data), &e); err != nil {
		fmt.Fprintln(a.stdout, data)
		return
	}
	fmt.Fprintln(a.stdout, strings.Join(a.logRow(e), "\t"))
}

// readSSE calls fn for each event until the stream ends.
func readSSE(r io.Reader, fn func(id, data string)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var id string
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 {
				fn(id, strings.Join(data, "\n"))
			}
			data = nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}

func newStatsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "stats", Short: "Query-log statistics"}
	var window string
	summary := &cobra.Command{
		Use: "summary", Short: "Totals of a window", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res map[string]any
			if err := a.call(cmd.Context(), request{method: http.MethodGet, path: "/stats/summary", query: queryValues("window", window), out: &res}); err != nil {
				return err
			}
			if ok, err := writeData(a.stdout, a.g.Output, res); ok {
				return err
			}
			return printSummary(a.stdout, res)
		},
	}
	summary.Flags().StringVar(&window, "window", "24h", "time window")
	var dim, topWindow string
	var top int
	var blocked bool
	topCmd := &cobra.Command{
		Use: "top", Short: "Top domains, clients, upstreams, lists or zones", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch dim {
			case "domains", "clients", "upstreams", "lists", "zones":
			default:
				return fmt.Errorf("--dim %q: use domains, clients, upstreams, lists or zones", dim)
			}
			if top < 1 || top > 100 {
				return fmt.Errorf("--top %d: 1 to 100", top)
			}
			q := queryValues("dim", dim, "top", strconv.Itoa(top), "window", topWindow)
			if blocked {
				q.Set("blocked", "true")
			}
			var res struct {
				Items []map[string]any `json:"items"`
			}
			if err := a.call(cmd.Context(), request{method: http.MethodGet, path: "/stats/top", query: q, out: &res}); err != nil {
				return err
			}
			if ok, err := writeData(a.stdout, a.g.Output, res.Items); ok {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "KEY\tCOUNT\tBLOCKED")
			for _, it := range res.Items {
				fmt.Fprintf(tw, "%v\t%v\t%v\n", firstOf(it, "key", "name", "domain"), firstOf(it, "count"), firstOf(it, "blocked"))
			}
			return tw.Flush()
		},
	}
	topCmd.Flags().StringVar(&dim, "dim", "domains", "domains, clients, upstreams, lists or zones")
	topCmd.Flags().IntVar(&top, "top", 10, "rows (at most 100)")
	topCmd.Flags().BoolVar(&blocked, "blocked", false, "only blocked queries")
	topCmd.Flags().StringVar(&topWindow, "window", "24h", "time window")
	cmd.AddCommand(summary, topCmd)
	return cmd
}

func firstOf(m map[string]any, keys ...string) any {
	for _, k := range keys {
		if v, ok := m[k]; ok {
			return v
		}
	}
	return "-"
}

// printSummary renders GET /stats/summary for people: counts as integers
// with thousands separators, the blocked share as a percentage, latencies
// in milliseconds with one decimal, the counts by status largest first.
func printSummary(w io.Writer, res map[string]any) error {
	num := func(k string) float64 { f, _ := res[k].(float64); return f }
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if n, ok := res["node"].(string); ok && n != "" {
		fmt.Fprintf(tw, "Node:\t%s\n", n)
	}
	if win, ok := res["window"].(string); ok {
		span := ""
		if from, ok := res["from"].(string); ok {
			until, _ := res["until"].(string)
			span = fmt.Sprintf(" (%s to %s)", shortTime(from), shortTime(until))
		}
		fmt.Fprintf(tw, "Window:\t%s%s\n", win, span)
	}
	fmt.Fprintf(tw, "Queries:\t%s\n", thousands(int64(num("total"))))
	fmt.Fprintf(tw, "Blocked:\t%s (%.1f%%)\n", thousands(int64(num("blocked"))), 100*num("blocked_share"))
	fmt.Fprintf(tw, "Average latency:\t%.1f ms\n", num("avg_latency_ms"))
	for _, sec := range []struct{ key, title string }{{"by_status", "By status"}, {"by_status_class", "By class"}} {
		m, _ := res[sec.key].(map[string]any)
		if len(m) == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s:\t\n", sec.title)
		keys := sortedKeys(m)
		sort.SliceStable(keys, func(i, j int) bool {
			fi, _ := m[keys[i]].(float64)
			fj, _ := m[keys[j]].(float64)
			return fi > fj
		})
		total := num("total")
		for _, k := range keys {
			f, _ := m[k].(float64)
			share := ""
			if total > 0 {
				share = fmt.Sprintf("\t%.1f%%", 100*f/total)
			}
			fmt.Fprintf(tw, "  %s\t%s%s\n", k, thousands(int64(f)), share)
		}
	}
	return tw.Flush()
}

// shortTime trims an RFC 3339 time to the minute, for a window's bounds.
func shortTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format("2006-01-02 15:04Z")
}

// thousands writes 1234567 as 1,234,567.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
