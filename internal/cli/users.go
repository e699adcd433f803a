package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/svcdns/svc/internal/api"
)

// newUsersCmd is `svc users`: local accounts through the REST API
// (/iam/users; users.read, users.write, users.delete).
func newUsersCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "users",
		Aliases: []string{"user"},
		Short:   "Manage local user accounts (list, create, get, set, disable, enable, delete)",
		Long: "Local accounts log in with a password (svc login -u NAME). Their roles come from role bindings that name " +
			"the user or one of its groups (rbac.bindings or RoleBinding objects). A disabled user's sessions and tokens " +
			"are refused at once. The last enabled administrator cannot be disabled, deleted or lose its admin group. " +
			"Users of an identity provider are not local accounts and are not listed here.",
	}
	cmd.AddCommand(newUsersListCmd(a), newUsersGetCmd(a), newUsersCreateCmd(a), newUsersSetCmd(a),
		newUsersStateCmd(a, "disable", "Disable users: their sessions and API tokens stop working at once, login is refused"),
		newUsersStateCmd(a, "enable", "Enable disabled users: their API tokens work again (sessions from before stay ended)"),
		newUsersDeleteCmd(a))
	return cmd
}

func userPath(name string) string { return "/iam/users/" + url.PathEscape(name) }

// printUsers writes users as the output format asks.
func (a *app) printUsers(users []api.IAMUser, one bool) error {
	var v any = users
	if one && len(users) == 1 {
		v = users[0]
	}
	if ok, err := writeData(a.stdout, a.g.Output, v); ok {
		return err
	}
	if a.g.Output == outName {
		for _, u := range users {
			fmt.Fprintln(a.stdout, "user/"+u.Name)
		}
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 3, ' ', 0)
	wide := a.g.Output == outWide
	hdr := "NAME\tSTATE\tADMIN\tGROUPS\tMUST-CHANGE\tLAST-LOGIN"
	if wide {
		hdr += "\tPASSWORD-CHANGED\tDISPLAY-NAME"
	}
	fmt.Fprintln(tw, hdr)
	stamp := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.Format(time.RFC3339)
	}
	for _, u := range users {
		state, groups := "enabled", strings.Join(u.Groups, ",")
		if u.Disabled {
			state = "disabled"
		}
		if groups == "" {
			groups = "-"
		}
		admin := "-"
		if u.BuiltinAdmin {
			admin = "builtin"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\t%s", u.Name, state, admin, groups, u.MustChangePassword, stamp(u.LastLoginAt))
		if wide {
			fmt.Fprintf(tw, "\t%s\t%s", stamp(u.PasswordChangedAt), u.DisplayName)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func newUsersListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use: "list", Aliases: []string{"ls"}, Short: "List local users", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var page struct {
				Items []api.IAMUser `json:"items"`
			}
			if err := a.call(cmd.Context(), request{method: http.MethodGet, path: "/iam/users", out: &page}); err != nil {
				return err
			}
			return a.printUsers(page.Items, false)
		},
	}
}

func (a *app) getUser(ctx context.Context, name string) (api.IAMUser, error) {
	var u api.UserBody
	err := a.call(ctx, request{method: http.MethodGet, path: userPath(name), out: &u})
	return u.IAMUser, err
}

func newUsersGetCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use: "get NAME...", Short: "Show local users", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var users []api.IAMUser
			for _, n := range args {
				u, err := a.getUser(cmd.Context(), n)
				if err != nil {
					return fmt.Errorf("user %s: %w", n, err)
				}
				users = append(users, u)
			}
			return a.printUsers(users, len(args) == 1)
		},
	}
}

func newUsersCreateCmd(a *app) *cobra.Command {
	var display string
	var groups []string
	var stdin, noMust bool
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a local user (the password is generated and printed once unless --password-stdin)",
		Long: "Creates a local account. Without --password-stdin a password is generated and printed once on standard " +
			"output; the user must change it at first login (svc login asks for a new one). With --password-stdin the " +
			"first line of standard input is the password, also to be changed at first login unless " +
			"--no-must-change-password. Grant roles with role bindings naming the user or a --group.",
		Example: "  svc users create alice --group dns-ops --display-name 'Alice Doe'\n" +
			"  printf '%s\\n' \"$PW\" | svc users create ci-bot --password-stdin --no-must-change-password",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.CreateUserRequest{Name: args[0], DisplayName: display, Groups: cleanList(groups)}
			if stdin {
				pw, err := a.secrets().line("password")
				if err != nil {
					return err
				}
				req.Password = pw
			} else if noMust {
				return fmt.Errorf("--no-must-change-password needs --password-stdin: a generated password must be changed at first login")
			}
			if noMust {
				f := false
				req.MustChangePassword = &f
			}
			var res api.CreatedUser
			if err := a.call(cmd.Context(), request{method: http.MethodPost, path: "/iam/users", body: req, out: &res}); err != nil {
				return err
			}
			if ok, err := writeData(a.stdout, a.g.Output, res); ok {
				return err
			}
			fmt.Fprintf(a.stdout, "user %s created\n", res.User.Name)
			if res.Password != "" {
				fmt.Fprintf(a.stdout, "generated password: %s\n", res.Password)
				fmt.Fprintln(a.stderr, "the password is shown once; the user must change it at first login")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&display, "display-name", "", "name shown in the dashboard")
	cmd.Flags().StringSliceVar(&groups, "group", nil, "group of the user (comma-separated or repeated)")
	cmd.Flags().BoolVar(&stdin, "password-stdin", false, "read the password from the first line of standard input")
	cmd.Flags().BoolVar(&noMust, "no-must-change-password", false, "do not require a password change at first login (needs --password-stdin)")
	return cmd
}

// cleanList drops empty and repeated entries, keeping the order.
func cleanList(in []string) []string {
	out := []string{}
	for _, v := range in {
		v = strings.TrimSpace(v)
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func newUsersSetCmd(a *app) *cobra.Command {
	var display string
	var groups, add, remove []string
	var reset, stdin, revoke bool
	cmd := &cobra.Command{
		Use:   "set NAME",
		Short: "Change a local user: display name, groups, or reset its password",
		Long: "--groups replaces the groups (--groups '' removes all); --add-group and --remove-group change them one by " +
			"one. --reset-password sets a new password (generated and printed once, or the first line of standard input " +
			"with --password-stdin), requires a change at next login and ends the user's sessions; --revoke-tokens " +
			"also deletes the user's API tokens.",
		Example: "  svc users set alice --add-group dns-admins\n  svc users set alice --reset-password --revoke-tokens",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, name, f := cmd.Context(), args[0], cmd.Flags()
			if stdin && !reset {
				return fmt.Errorf("--password-stdin goes with --reset-password")
			}
			if revoke && !reset {
				return fmt.Errorf("--revoke-tokens goes with --reset-password")
			}
			if f.Changed("groups") && (len(add) > 0 || len(remove) > 0) {
				return fmt.Errorf("--groups replaces the groups; use it without --add-group and --remove-group")
			}
			var patch api.UpdateUserRequest
			if f.Changed("display-name") {
				patch.DisplayName = &display
			}
			switch {
			case f.Changed("groups"):
				gs := cleanList(groups)
				patch.Groups = &gs
			case len(add) > 0 || len(remove) > 0:
				cur, err := a.getUser(ctx, name)
				if err != nil {
					return err
				}
				gs := cleanList(append(slices.Clone(cur.Groups), add...))
				gs = slices.DeleteFunc(gs, func(g string) bool { return slices.Contains(remove, g) })
				patch.Groups = &gs
			}
			if patch.DisplayName == nil && patch.Groups == nil && !reset {
				return fmt.Errorf("nothing to change: pass --display-name, --groups, --add-group, --remove-group or --reset-password")
			}
			var out any
			if patch.DisplayName != nil || patch.Groups != nil {
				var u api.UserBody
				if err := a.call(ctx, request{method: http.MethodPatch, path: userPath(name), body: patch, out: &u}); err != nil {
					return err
				}
				out = u
				if a.g.Output != outJSON && a.g.Output != outYAML {
					groups := strings.Join(u.Groups, ",")
					if groups == "" {
						groups = "none"
					}
					fmt.Fprintf(a.stdout, "user %s changed (groups: %s)\n", u.Name, groups)
				}
			}
			if reset {
				req := api.ResetPasswordRequest{RevokeTokens: revoke}
				if stdin {
					pw, err := a.secrets().line("password")
					if err != nil {
						return err
					}
					req.Password = pw
				}
				var res api.ResetPasswordAnswer
				if err := a.call(ctx, request{method: http.MethodPost, path: userPath(name) + "/reset-password", body: req, out: &res}); err != nil {
					return err
				}
				out = res
				if a.g.Output != outJSON && a.g.Output != outYAML {
					fmt.Fprintf(a.stdout, "password of %s reset; it must be changed at next login\n", res.User.Name)
					if res.Password != "" {
						fmt.Fprintf(a.stdout, "generated password: %s\n", res.Password)
					}
					if revoke {
						fmt.Fprintf(a.stdout, "%d API token(s) revoked\n", res.TokensRevoked)
					}
				}
			}
			_, err := writeData(a.stdout, a.g.Output, out)
			return err
		},
	}
	cmd.Flags().StringVar(&display, "display-name", "", "name shown in the dashboard")
	cmd.Flags().StringSliceVar(&groups, "groups", nil, "replace the groups (comma-separated; '' removes all)")
	cmd.Flags().StringSliceVar(&add, "add-group", nil, "add groups")
	cmd.Flags().StringSliceVar(&remove, "remove-group", nil, "remove groups")
	cmd.Flags().BoolVar(&reset, "reset-password", false, "set a new password (generated unless --password-stdin); ends the user's sessions")
	cmd.Flags().BoolVar(&stdin, "password-stdin", false, "with --reset-password: read the password from the first line of standard input")
	cmd.Flags().BoolVar(&revoke, "revoke-tokens", false, "with --reset-password: also delete the user's API tokens")
	return cmd
}

func newUsersStateCmd(a *app, verb, short string) *cobra.Command {
	return &cobra.Command{
		Use: verb + " NAME...", Short: short, Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, n := range args {
				var u api.UserBody
				if err := a.call(cmd.Context(), request{method: http.MethodPost, path: userPath(n) + "/" + verb, out: &u}); err != nil {
					return fmt.Errorf("user %s: %w", n, err)
				}
				fmt.Fprintf(a.stdout, "user %s %sd\n", u.Name, verb)
			}
			return nil
		},
	}
}

func newUsersDeleteCmd(a *app) *cobra.Command {
	var ignore bool
	cmd := &cobra.Command{
		Use: "delete NAME...", Aliases: []string{"rm"}, Short: "Delete local users and their API tokens", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, n := range args {
				err := a.call(cmd.Context(), request{method: http.MethodDelete, path: userPath(n)})
				if err != nil && !(ignore && isNotFound(err)) {
					return fmt.Errorf("user %s: %w", n, err)
				}
				if err == nil {
					fmt.Fprintf(a.stdout, "user %s deleted\n", n)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&ignore, "ignore-not-found", false, "treat a missing user as deleted")
	return cmd
}
