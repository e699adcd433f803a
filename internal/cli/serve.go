package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/node"
)

func newServeCmd(g *Globals, _ Env) *cobra.Command {
	var role string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a node: DNS listeners, the REST API, health checks and metrics",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Before anything starts: a bootstrap token that is set but empty
			// or malformed stops the start instead of being ignored.
			if err := auth.CheckBootstrapTokenEnv(os.LookupEnv); err != nil {
				return err
			}
			return node.Run(cmd.Context(), node.Options{
				ConfigPath:     g.Config,
				ConfigExplicit: cmd.Flags().Changed("config"),
				Environ:        os.Environ(),
				Stderr:         cmd.ErrOrStderr(),
				Role:           role,
			})
		},
	}
	cmd.Flags().StringVar(&role, "role", node.RoleAll, "all (one process), operator (leader-elected reconcilers, list fetching; no DNS) or dataplane (DNS, API; lists copied from the operator); operator and dataplane need store.driver kube")
	return cmd
}
