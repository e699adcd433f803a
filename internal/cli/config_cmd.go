package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

func newConfigCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Edit the client configuration file (contexts)"}
	cmd.AddCommand(
		&cobra.Command{
			Use: "current-context", Short: "Print the current context", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				cfg, err := a.config()
				if err != nil {
					return err
				}
				if cfg.CurrentContext == "" {
					return fmt.Errorf("no current context in %s; log in or run `svc config use-context NAME`", a.g.CLIConfig)
				}
				fmt.Fprintln(a.stdout, cfg.CurrentContext)
				return nil
			},
		},
		&cobra.Command{
			Use: "delete-context NAME", Short: "Delete a context and its stored token", Args: cobra.ExactArgs(1),
			ValidArgsFunction: a.completeContexts,
			RunE: func(cmd *cobra.Command, args []string) error {
				cfg, err := a.config()
				if err != nil {
					return err
				}
				c := cfg.find(args[0])
				if c == nil {
					return fmt.Errorf("context %q not found", args[0])
				}
				if err := a.tokens(cfg).del(c); err != nil {
					return err
				}
				cfg.remove(args[0])
				if err := cfg.save(a.g.CLIConfig); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "deleted context %q\n", args[0])
				return nil
			},
		},
		&cobra.Command{
			Use: "get-contexts", Short: "List the contexts", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				cfg, err := a.config()
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 3, ' ', 0)
				fmt.Fprintln(tw, "CURRENT\tNAME\tSERVER\tNAMESPACE\tUSER")
				for _, c := range cfg.Contexts {
					mark := ""
					if c.Name == cfg.CurrentContext {
						mark = "*"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", mark, c.Name, c.Server, c.DefaultNamespace, c.User)
				}
				return tw.Flush()
			},
		},
		&cobra.Command{
			Use: "schema", Short: "Print the JSON schema of the client configuration file", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				_, err := fmt.Fprint(a.stdout, clientConfigSchema)
				return err
			},
		},
		newSetContextCmd(a),
		&cobra.Command{
			Use: "show", Short: "Print the client configuration (tokens redacted)", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				cfg, err := a.config()
				if err != nil {
					return err
				}
				for i := range cfg.Contexts {
					if cfg.Contexts[i].Token != "" {
						cfg.Contexts[i].Token = "REDACTED"
					}
				}
				b, err := yaml.Marshal(cfg)
				if err != nil {
					return err
				}
				_, err = a.stdout.Write(b)
				return err
			},
		},
		&cobra.Command{
			Use: "use-context NAME", Short: "Make a context the current one", Args: cobra.ExactArgs(1),
			ValidArgsFunction: a.completeContexts,
			RunE: func(cmd *cobra.Command, args []string) error {
				cfg, err := a.config()
				if err != nil {
					return err
				}
				if cfg.find(args[0]) == nil {
					return fmt.Errorf("context %q not found", args[0])
				}
				cfg.CurrentContext = args[0]
				if err := cfg.save(a.g.CLIConfig); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "switched to context %q\n", args[0])
				return nil
			},
		},
	)
	return cmd
}

func newSetContextCmd(a *app) *cobra.Command {
	var server, ns string
	cmd := &cobra.Command{
		Use: "set-context NAME", Short: "Create or change a context", Args: cobra.ExactArgs(1),
		ValidArgsFunction: a.completeContexts,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := a.config()
			if err != nil {
				return err
			}
			c := cfg.upsert(args[0])
			if cmd.Flags().Changed("server") {
				s, err := normalizeServer(server)
				if err != nil {
					return err
				}
				c.Server = s
			}
			if cmd.Flags().Changed("default-namespace") {
				c.DefaultNamespace = ns
			}
			if cfg.CurrentContext == "" {
				cfg.CurrentContext = c.Name
			}
			if err := cfg.save(a.g.CLIConfig); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "context %q set\n", c.Name)
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "server", "", "API address of the context")
	cmd.Flags().StringVar(&ns, "default-namespace", "", "namespace used when -n is not given")
	return cmd
}

func (a *app) completeContexts(_ *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	cfg, err := a.config()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var out []string
	for _, c := range cfg.Contexts {
		out = append(out, c.Name)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
