package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/svcdns/svc/internal/api"
)

// defaultAdminSocket is auth.adminSocket.path's default.
const defaultAdminSocket = "/run/service/service.sock"

// adminDialError names the socket and the fix: most failures are a server
// started with another auth.adminSocket.path (make run uses
// .run/service.sock) or a user outside the socket's group.
func adminDialError(socket string, err error) error {
	return fmt.Errorf("admin socket %s: %w\nhint: is the server running on this machine? Pass the path of its auth.adminSocket.path with --socket PATH or SERVICE_ADMIN_SOCKET (make run: --socket .run/service.sock); permission denied means run as the server's user or a member of auth.adminSocket.group", socket, err)
}

type adminOpts struct {
	socket   string
	protocol string
}

// adminCall sends one request to the admin socket: HTTP/1.1 (or ndjson:
// one JSON request line {method, path, body} and one JSON answer line).
func (a *app) adminCall(ctx context.Context, o *adminOpts, method, path string, body, out any) error {
	var payload []byte
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		payload = b
	}
	if o.protocol == "ndjson" {
		return a.adminNDJSON(ctx, o, method, path, payload, out)
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", o.socket)
	}}
	hc := &http.Client{Transport: tr, Timeout: a.g.RequestTimeout}
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://admin"+path, rd)
	if err != nil {
		return err
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := hc.Do(req)
	if err != nil {
		return adminDialError(o.socket, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 400 {
		if o.protocol == "auto" && (res.StatusCode == http.StatusBadRequest && len(b) == 0) {
			return a.adminNDJSON(ctx, o, method, path, payload, out)
		}
		return decodeAPIError(res.StatusCode, b, "")
	}
	if out != nil && len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("admin socket answer: %w", err)
		}
	}
	return nil
}

func (a *app) adminNDJSON(ctx context.Context, o *adminOpts, method, path string, payload []byte, out any) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", o.socket)
	if err != nil {
		return adminDialError(o.socket, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(a.g.RequestTimeout))
	req := map[string]any{"method": method, "path": path}
	if payload != nil {
		req["body"] = json.RawMessage(payload)
	}
	line, _ := json.Marshal(req)
	if _, err := conn.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("admin socket: %w", err)
	}
	ans, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil && len(ans) == 0 {
		return fmt.Errorf("admin socket: %w", err)
	}
	var env struct {
		Status int             `json:"status"`
		Body   json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(ans, &env); err != nil {
		return fmt.Errorf("admin socket answer: %w", err)
	}
	if env.Status >= 400 {
		return decodeAPIError(env.Status, env.Body, "")
	}
	if out != nil && len(env.Body) > 0 {
		return json.Unmarshal(env.Body, out)
	}
	return nil
}

func newAdminCmd(a *app) *cobra.Command {
	o := &adminOpts{}
	cmd := &cobra.Command{Use: "admin", Short: "Break-glass administration over the local admin socket"}
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.socket, "socket", "", "admin socket path (default $SERVICE_ADMIN_SOCKET, else "+defaultAdminSocket+")")
	pf.StringVar(&o.protocol, "protocol", "auto", "auto, http or ndjson")
	check := func() error {
		o.socket = firstNonEmpty(o.socket, a.env("SERVICE_ADMIN_SOCKET"), defaultAdminSocket)
		switch o.protocol {
		case "auto", "http", "ndjson":
			return nil
		}
		return fmt.Errorf("--protocol %q: use auto, http or ndjson", o.protocol)
	}

	var create, pwStdin, revoke bool
	var password string
	reset := &cobra.Command{
		Use: "reset-password [USERNAME]", Short: "Set or generate a user's password (the user must change it)", Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := check(); err != nil {
				return err
			}
			user := "admin"
			if len(args) == 1 {
				user = args[0]
			}
			if pwStdin {
				p, err := readSecret(a.stdin)
				if err != nil {
					return err
				}
				password = p
			}
			var res api.AdminResetPasswordAnswer
			body := api.AdminResetPasswordRequest{Username: user, Password: password, Create: create, RevokeTokens: revoke}
			if err := a.adminCall(cmd.Context(), o, http.MethodPost, "/admin/v1/reset-password", body, &res); err != nil {
				return err
			}
			if ok, err := writeData(a.stdout, a.g.Output, res); ok {
				return err
			}
			verb := "reset"
			if res.Created {
				verb = "created"
			}
			fmt.Fprintf(a.stdout, "password of %s %s; it must be changed at next login\n", res.Username, verb)
			if res.Password != "" {
				fmt.Fprintf(a.stdout, "generated password: %s\n", res.Password)
			}
			return nil
		},
	}
	reset.Flags().BoolVar(&create, "create", false, "create the user when missing")
	reset.Flags().StringVar(&password, "password", "", "new password (empty: generated)")
	reset.Flags().BoolVar(&pwStdin, "password-stdin", false, "read the new password from standard input")
	reset.Flags().BoolVar(&revoke, "revoke-tokens", false, "also revoke the user's tokens")

	var desc, expires, user string
	token := &cobra.Command{
		Use: "create-token", Short: "Create a break-glass token (or a user's token with --user)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := check(); err != nil {
				return err
			}
			var res api.AdminCreatedToken
			body := api.AdminCreateTokenRequest{User: user, Description: desc, ExpiresIn: expires}
			if err := a.adminCall(cmd.Context(), o, http.MethodPost, "/admin/v1/create-token", body, &res); err != nil {
				return err
			}
			if ok, err := writeData(a.stdout, a.g.Output, res); ok {
				return err
			}
			fmt.Fprintln(a.stdout, res.Token)
			exp := "never"
			if res.ExpiresAt != nil {
				exp = res.ExpiresAt.Format(time.RFC3339)
			}
			fmt.Fprintf(a.stderr, "token %s of %v/%v expires %s\n", res.ID, res.Owner.Kind, res.Owner.Name, exp)
			return nil
		},
	}
	token.Flags().StringVar(&desc, "description", "", "description of the token")
	token.Flags().StringVar(&expires, "expires-in", "", "lifetime, e.g. 24h")
	token.Flags().StringVar(&user, "user", "", "local user owning the token (default: the break-glass service account)")

	users := &cobra.Command{
		Use: "list-users", Short: "List local users", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := check(); err != nil {
				return err
			}
			var res api.AdminUserList
			if err := a.adminCall(cmd.Context(), o, http.MethodGet, "/admin/v1/list-users", nil, &res); err != nil {
				return err
			}
			if ok, err := writeData(a.stdout, a.g.Output, res); ok {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "NAME\tADMIN\tDISABLED\tMUST-CHANGE\tLAST-LOGIN")
			for _, u := range res.Users {
				last := "-"
				if u.LastLoginAt != nil {
					last = u.LastLoginAt.Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%t\t%t\t%t\t%s\n", u.Name, u.BuiltinAdmin, u.Disabled, u.MustChangePassword, last)
			}
			return tw.Flush()
		},
	}
	cmd.AddCommand(reset, token, users)
	return cmd
}
