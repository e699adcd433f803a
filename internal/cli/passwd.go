package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/svcdns/svc/internal/api"
)

// secrets reads passwords for one invocation: lines of standard input when
// a --*-stdin flag says so (one buffered reader, so the current and the new
// password can follow each other), else prompts without echo on a terminal.
type secrets struct {
	a  *app
	rd *bufio.Reader
}

func (a *app) secrets() *secrets {
	if a.secretReader == nil {
		a.secretReader = &secrets{a: a, rd: bufio.NewReader(a.stdin)}
	}
	return a.secretReader
}

// line reads the next line of standard input.
func (s *secrets) line(what string) (string, error) {
	l, err := s.rd.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading %s from standard input: %w", what, err)
	}
	l = strings.TrimRight(l, "\r\n")
	if l == "" {
		return "", fmt.Errorf("no %s on standard input (one line each)", what)
	}
	return l, nil
}

// terminal is the file descriptor of standard input when it is a terminal.
func (s *secrets) terminal() (int, bool) {
	f, ok := s.a.stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0, false
	}
	return int(f.Fd()), true
}

// prompt asks once without echo; ok is false when there is no terminal.
func (s *secrets) prompt(label string) (string, bool, error) {
	fd, ok := s.terminal()
	if !ok {
		return "", false, nil
	}
	fmt.Fprint(s.a.stderr, label)
	b, err := term.ReadPassword(fd)
	fmt.Fprintln(s.a.stderr)
	if err != nil {
		return "", true, fmt.Errorf("reading the password: %w", err)
	}
	return string(b), true, nil
}

// newPassword reads the new password: one line of standard input with
// fromStdin, else twice at a terminal prompt (they must match). Without
// either it returns errNoNewPassword so the caller can say which flag to use.
func (s *secrets) newPassword(fromStdin bool) (string, error) {
	if fromStdin {
		return s.line("new password")
	}
	for range 3 {
		p1, ok, err := s.prompt("New password: ")
		if !ok || err != nil {
			if !ok {
				err = errNoNewPassword
			}
			return "", err
		}
		p2, _, err := s.prompt("Repeat the new password: ")
		if err != nil {
			return "", err
		}
		if p1 == p2 && p1 != "" {
			return p1, nil
		}
		fmt.Fprintln(s.a.stderr, "the passwords differ or are empty; try again")
	}
	return "", errors.New("the new password was not confirmed")
}

var errNoNewPassword = errors.New("standard input is not a terminal: pass --new-password-stdin and give the new password as a line of standard input")

// changePassword sends POST /auth/password with c's credentials (a token,
// or a session whose CSRF value is csrf) and returns the answer; with a
// session the answer carries a fresh session cookie and CSRF value.
func changePassword(ctx context.Context, c *Client, csrf, current, next string, revokeTokens bool) (*api.MeBody, error) {
	var me api.MeBody
	hdr := http.Header{}
	if csrf != "" {
		hdr.Set("X-Service-CSRF", csrf)
	}
	body := map[string]any{"currentPassword": current, "newPassword": next, "revokeTokens": revokeTokens}
	if err := c.Do(ctx, request{method: http.MethodPost, path: "/auth/password", body: body, header: hdr, out: &me}); err != nil {
		return nil, fmt.Errorf("changing the password: %w", err)
	}
	return &me, nil
}

func newPasswdCmd(a *app) *cobra.Command {
	var stdin, revoke bool
	cmd := &cobra.Command{
		Use:   "passwd",
		Short: "Change the password of the logged-in local user",
		Long: "Asks for the current password and the new one twice (no echo) on a terminal. With --password-stdin " +
			"standard input holds two lines: the current password, then the new one. The server's password policy " +
			"applies; other sessions of the user end. A generated administrator password must be changed this way " +
			"(or by `svc login`, which asks for a new one when the server requires it) before other verbs answer.",
		Example: "  svc passwd\n  printf '%s\\n%s\\n' \"$OLD\" \"$NEW\" | svc passwd --password-stdin",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s := a.secrets()
			var cur, next string
			var err error
			if stdin {
				if cur, err = s.line("current password"); err != nil {
					return err
				}
				if next, err = s.line("new password"); err != nil {
					return err
				}
			} else {
				var ok bool
				if cur, ok, err = s.prompt("Current password: "); err != nil {
					return err
				} else if !ok {
					return errors.New("standard input is not a terminal: pass --password-stdin with the current and the new password on two lines")
				}
				if next, err = s.newPassword(false); err != nil {
					return err
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			me, err := changePassword(cmd.Context(), c, "", cur, next, revoke)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "password of %s changed\n", me.Principal.Name)
			return nil
		},
	}
	cmd.Flags().BoolVar(&stdin, "password-stdin", false, "read the current and the new password from standard input (two lines)")
	cmd.Flags().BoolVar(&revoke, "revoke-tokens", false, "also revoke every API token of the user (the CLI's own too: log in again)")
	return cmd
}
