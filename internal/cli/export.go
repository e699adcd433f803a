package cli

import (
	"bytes"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/svcdns/svc/internal/validation"
)

// writeManifests prints objects as multi-document YAML, or as a List with -o json.
func writeManifests(w io.Writer, format string, objs []map[string]any, header string) error {
	if format == outJSON {
		return writeJSON(w, listOf(objs))
	}
	var buf bytes.Buffer
	buf.WriteString(header)
	for i, o := range objs {
		if i > 0 {
			buf.WriteString("---\n")
		}
		b, err := yaml.Marshal(o)
		if err != nil {
			return fmt.Errorf("yaml: %w", err)
		}
		buf.Write(b)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

func newExportCmd(a *app) *cobra.Command {
	var excludeManaged, safe, allNS bool
	cmd := &cobra.Command{
		Use:               "export [KIND...]",
		Short:             "Print objects as manifests that re-apply unchanged (default: every kind)",
		ValidArgsFunction: a.completeKinds,
		RunE: func(cmd *cobra.Command, args []string) error {
			format := a.g.Output
			if format == outTable {
				format = outYAML
			}
			if err := checkOutput(format, outYAML, outJSON); err != nil {
				return err
			}
			var kinds []validation.KindInfo
			if len(args) == 0 {
				ks, err := a.servedKinds(false)
				if err != nil {
					return err
				}
				kinds = ks
			}
			for _, k := range args {
				ki, err := a.resolveKind(k)
				if err != nil {
					return err
				}
				kinds = append(kinds, ki)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ns := ""
			if a.g.Namespace != "" && !allNS {
				ns = a.g.Namespace
			}
			objs, err := a.exportObjects(cmd.Context(), c, kinds, ns, excludeManaged, safe, false)
			if err != nil {
				return err
			}
			return writeManifests(a.stdout, format, objs, "")
		},
	}
	cmd.Flags().BoolVar(&excludeManaged, "exclude-managed", false, "leave out objects managed by files or integrations")
	cmd.Flags().BoolVar(&safe, "safe", false, "redact credentials in URLs")
	cmd.Flags().BoolVarP(&allNS, "all-namespaces", "A", true, "every namespace (default; -n NAMESPACE narrows)")
	return cmd
}

func newBackupCmd(a *app) *cobra.Command {
	var o backupOptions
	cmd := &cobra.Command{
		Use:   "backup --out FILE",
		Short: "Write settings, objects and local users to a file that `svc restore` puts back (same or fresh node)",
		Long: "Writes the cluster settings set through the API, every object (objects a file or the bootstrap manages are " +
			"marked; restore leaves them to their source on a node that has one and creates them on a fresh node) " +
			"and the local users. Password hashes only with --include-secrets; without them restored users get no " +
			"password until `svc admin reset-password NAME`. API tokens are never backed up: create new ones.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runBackup(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.out, "out", "", "file to write (- for standard output)")
	cmd.Flags().BoolVar(&o.excludeManaged, "exclude-managed", false, "leave out objects managed by files or integrations")
	cmd.Flags().BoolVar(&o.safe, "safe", false, "redact credentials in URLs")
	cmd.Flags().BoolVar(&o.includeSecrets, "include-secrets", false, "include password hashes of local users (needs users.write)")
	return cmd
}

func (a *app) completeKinds(_ *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	kinds, err := a.servedKinds(false)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var out []string
	for _, k := range kinds {
		out = append(out, k.Plural)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
