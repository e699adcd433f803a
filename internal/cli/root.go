// Package cli is the svc command tree: the server (`svc serve`) and every client verb.
package cli

import (
	"context"
	"io"
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
	f.StringVar(&g.CLIConfig, "cli-config", firstNonEmpty(env("SERVICE_CLI_CONFIG"), "~/.config/service/config.yaml"), "client configuration file (contexts)")
	f.StringVar(&g.Config, "config", "/etc/service/service.yaml", "server configuration file")
	f.StringVar(&g.Context, "context", env("SERVICE_CONTEXT"), "context of the client configuration to use")
	f.BoolVar(&g.InsecureSkipTLSVerify, "insecure-skip-tls-verify", false, "do not verify the server's certificate")
	f.StringVarP(&g.Namespace, "namespace", "n", "", "namespace (default: the context's, else default)")
	f.StringVarP(&g.Output, "output", "o", "table", "output format: table, wide, json, yaml, name")
	f.DurationVar(&g.RequestTimeout, "request-timeout", 30*time.Second, "time limit of one request")
	f.StringVar(&g.Server, "server", env("SERVICE_SERVER"), "API address, e.g. https://127.0.0.1:8080")
	f.StringVar(&g.Token, "token", env("SERVICE_TOKEN"), "API token")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "wide", "json", "yaml", "name"}, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("context", a.completeContexts)

	root.AddCommand(
		newServeCmd(g, env), newVersionCmd(),
		newConfigCmd(a), newLoginCmd(a), newLogoutCmd(a),
		newGetCmd(a), newDescribeCmd(a), newApplyCmd(a), newDeleteCmd(a),
		newExportCmd(a), newBackupCmd(a), newRestoreCmd(a), newAPICmd(a),
		newRecordsCmd(a), newZonesCmd(a), newImportCmd(a),
		newQueryCmd(a), newBlockingCmd(a), newCacheCmd(a), newSettingsCmd(a),
		newListsCmd(a), newAuditCmd(a), newTokenCmd(a), newNodesCmd(a),
		newHealthCmd(a), newLameduckCmd(a), newDoctorCmd(a), newAdminCmd(a),
		newLogsCmd(a), newStatsCmd(a), newCompletionCmd(a),
	)
	return root
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
