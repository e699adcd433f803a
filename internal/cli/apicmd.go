package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func newAPICmd(a *app) *cobra.Command {
	var data, ctype string
	var headers []string
	cmd := &cobra.Command{
		Use:     "api [METHOD] PATH",
		Short:   "Send a raw request to the API (path below /api/v1)",
		Example: "  svc api /auth/me\n  svc api POST /dns/query -d '{\"name\":\"example.com\"}'\n  svc api PATCH /settings -d @patch.json",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			method, path := http.MethodGet, args[0]
			if len(args) == 2 {
				method, path = strings.ToUpper(args[0]), args[1]
			}
			if !strings.HasPrefix(path, "/") {
				path = "/" + path
			}
			path = strings.TrimPrefix(path, "/api/v1")
			var body []byte
			switch {
			case data == "":
			case data == "@-":
				b, err := io.ReadAll(a.stdin)
				if err != nil {
					return fmt.Errorf("reading standard input: %w", err)
				}
				body = b
			case strings.HasPrefix(data, "@"):
				b, err := os.ReadFile(data[1:])
				if err != nil {
					return fmt.Errorf("--data: %w", err)
				}
				body = b
			default:
				body = []byte(data)
			}
			if body != nil && len(args) == 1 {
				method = http.MethodPost
			}
			hdr := http.Header{}
			for _, h := range headers {
				k, v, ok := strings.Cut(h, ":")
				if !ok {
					return fmt.Errorf("--header %q: use Name: value", h)
				}
				hdr.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			path, rawQuery, _ := strings.Cut(path, "?")
			r := request{method: method, path: path, header: hdr}
			if body != nil {
				r.body, r.ctype = body, ctype
			}
			if rawQuery != "" {
				r.path += "?" + rawQuery
			}
			var out []byte
			r.out = &out
			if err := c.Do(cmd.Context(), r); err != nil {
				return err
			}
			var pretty bytes.Buffer
			if json.Valid(out) && json.Indent(&pretty, out, "", "  ") == nil {
				pretty.WriteByte('\n')
				_, err = a.stdout.Write(pretty.Bytes())
				return err
			}
			_, err = a.stdout.Write(out)
			return err
		},
	}
	cmd.Flags().StringVarP(&data, "data", "d", "", "request body: inline, @file or @- for standard input")
	cmd.Flags().StringArrayVarP(&headers, "header", "H", nil, "extra header Name: value (repeatable)")
	cmd.Flags().StringVar(&ctype, "content-type", "application/json", "content type of the body")
	return cmd
}
