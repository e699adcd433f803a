// Package cli is the svc command tree: the server (`svc serve`) and every client verb.
package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Globals are the flags every verb shares (spec: "Command-line client").
type Globals struct {
	CAFile                string
	CLIConfig             string
	Config                string
	Context               string
	InsecureSkipTLSVerify bool
	Namespace             string
	Output                string
	RequestTimeout        time.Duration
	Server                string
	Token                 string
}

// Env reads the environment; tests pass their own.
type Env func(key string) string

// NewRoot builds the command tree.
func NewRoot(env Env, stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	g := &Globals{}
	a := &app{g: g, env: env, stdin: stdin, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "svc",
		Short:         "DNS filtering and authoritative DNS server, and its client",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	f := root.PersistentFlags()
	f.StringVar(&g.CAFile, "ca-file", "", "CA bundle that verifies the server's certificate")
	// Defaults that come from the environment are resolved at use time
	// (resolveEnv), never shown by --help: SERVICE_TOKEN is a secret and a
	// pasted help output must not carry it.
	f.StringVar(&g.CLIConfig, "cli-config", "", "client configuration file (contexts) (default $SERVICE_CLI_CONFIG, else ~/.config/service/config.yaml)")
	f.StringVar(&g.Config, "config", "/etc/service/service.yaml", "server configuration file")
	f.StringVar(&g.Context, "context", "", "context of the client configuration to use (default $SERVICE_CONTEXT, else the current context)")
	f.BoolVar(&g.InsecureSkipTLSVerify, "insecure-skip-tls-verify", false, "do not verify the server's certificate")
	f.StringVarP(&g.Namespace, "namespace", "n", "", "namespace (default: the context's, else default)")
	f.StringVarP(&g.Output, "output", "o", "table", "output format: table, wide, json, yaml, name")
	f.DurationVar(&g.RequestTimeout, "request-timeout", 30*time.Second, "time limit of one request")
	f.StringVar(&g.Server, "server", "", "API address, e.g. https://127.0.0.1:8080 (default $SERVICE_SERVER, else the context's)")
	f.StringVar(&g.Token, "token", "", "API token (default $SERVICE_TOKEN, else the context's)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { a.resolveEnv(); return nil }
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "wide", "json", "yaml", "name"}, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("context", a.completeContexts)

	root.AddCommand(
		newServeCmd(g, env), newVersionCmd(),
		newConfigCmd(a), newLoginCmd(a), newLogoutCmd(a), newPasswdCmd(a),
		newGetCmd(a), newDescribeCmd(a), newApplyCmd(a), newDeleteCmd(a),
		newExportCmd(a), newBackupCmd(a), newRestoreCmd(a), newAPICmd(a),
		newRecordsCmd(a), newZonesCmd(a), newImportCmd(a),
		newQueryCmd(a), newBlockingCmd(a), newCacheCmd(a), newSettingsCmd(a),
		newListsCmd(a), newServicesCmd(a), newSafeSearchCmd(a), newAuditCmd(a), newTokenCmd(a), newNodesCmd(a),
		newHealthCmd(a), newLameduckCmd(a), newDoctorCmd(a), newAdminCmd(a),
		newLogsCmd(a), newStatsCmd(a), newCompletionCmd(a), newUsersCmd(a), newUnblockCmd(a),
		newEdgeCmd(a), newVIPCmd(a),
	)
	refuseUnknownSubcommands(root)
	return root
}

// annotationGroup marks a command that only groups subcommands.
const annotationGroup = "svc/group"

// refuseUnknownSubcommands makes every command group (a command with
// subcommands and no action of its own) fail on an unknown subcommand with
// a did-you-mean, instead of cobra's default of printing help and exiting
// 0, which reads as success in scripts (`svc lists add` once did that).
// A bare group still prints its help.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if c == c.Root() || !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[annotationGroup] = "true"
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		return unknownSubcommand(cmd, args[0])
	}
}

// unknownSubcommand is the error for `svc GROUP TYPO`.
func unknownSubcommand(cmd *cobra.Command, typed string) error {
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	msg := fmt.Sprintf("unknown command %q for %q", typed, cmd.CommandPath()) + didYouMean(typed, names)
	msg += fmt.Sprintf("\navailable: %s (see %s --help)", strings.Join(names, ", "), cmd.CommandPath())
	return &exitError{code: 2, msg: msg}
}

// quotedList renders ["a" "b"] as "a" or "b".
func quotedList(v []string) string {
	q := make([]string, len(v))
	for i, s := range v {
		q[i] = strconv.Quote(s)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// Main runs the command line and returns the process exit code.
func Main(ctx context.Context, args []string, env Env, stdin io.Reader, stdout, stderr io.Writer) int {
	root := NewRoot(env, stdin, stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		printError(stderr, err)
		return exitCode(err)
	}
	return 0
}

// resolveEnv fills the global flags the user did not pass from the
// environment. It runs before every verb and again from the accessors that
// completion functions reach without the pre-run hook; it is idempotent.
func (a *app) resolveEnv() {
	if a.envResolved {
		return
	}
	a.envResolved = true
	g := a.g
	g.CLIConfig = firstNonEmpty(g.CLIConfig, a.env("SERVICE_CLI_CONFIG"), "~/.config/service/config.yaml")
	g.Context = firstNonEmpty(g.Context, a.env("SERVICE_CONTEXT"))
	g.Server = firstNonEmpty(g.Server, a.env("SERVICE_SERVER"))
	g.Token = firstNonEmpty(g.Token, a.env("SERVICE_TOKEN"))
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

func printError(w io.Writer, err error) {
	if e, ok := err.(*exitError); ok && e.msg == "" {
		return
	}
	printErr(w, err)
}

// exitError carries a chosen exit code and an optional message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func exitCode(err error) int {
	if e, ok := err.(*exitError); ok {
		return e.code
	}
	return 1
}
