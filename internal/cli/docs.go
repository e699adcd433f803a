package cli

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// GenerateDocs writes docs/cli.md: every command of the tree with its usage,
// description and flags. The tree is built with an empty environment so the
// text does not depend on the machine.
func GenerateDocs(w io.Writer) error {
	root := NewRoot(func(string) string { return "" }, strings.NewReader(""), io.Discard, io.Discard)
	root.InitDefaultHelpCmd()
	var b bytes.Buffer
	b.WriteString("# The svc command-line client\n\n")
	b.WriteString("Generated from the command tree by `go test ./internal/cli -run TestDocs -update`; do not edit.\n\n")
	b.WriteString("Client verbs call the REST API under `{server}/api/v1` with the server and token of `--server`/`--token`\n")
	b.WriteString("(or `SERVICE_SERVER`/`SERVICE_TOKEN`), else of the current context of the client configuration file.\n")
	b.WriteString("Errors print the server's message and hint and exit non-zero; a 401 says how to log in.\n\n")
	b.WriteString("## Global flags\n\n```\n")
	b.WriteString(root.PersistentFlags().FlagUsagesWrapped(100))
	b.WriteString("```\n\n## Commands\n\n")
	var walk func(c *cobra.Command)
	var all []*cobra.Command
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			all = append(all, sub)
			walk(sub)
		}
	}
	walk(root)
	for _, c := range all {
		fmt.Fprintf(&b, "- [%s](#%s)\n", c.CommandPath(), anchor(c.CommandPath()))
	}
	b.WriteString("\n")
	for _, c := range all {
		fmt.Fprintf(&b, "### %s\n\n", c.CommandPath())
		if c.Short != "" {
			fmt.Fprintf(&b, "%s.\n\n", strings.TrimSuffix(c.Short, "."))
		}
		if c.Long != "" {
			fmt.Fprintf(&b, "%s\n\n", c.Long)
		}
		if c.Runnable() && c.Annotations[annotationGroup] == "" {
			fmt.Fprintf(&b, "```\n%s\n```\n\n", c.UseLine())
		}
		if len(c.Aliases) > 0 {
			fmt.Fprintf(&b, "Aliases: %s\n\n", strings.Join(c.Aliases, ", "))
		}
		if c.Example != "" {
			fmt.Fprintf(&b, "Examples:\n\n```\n%s\n```\n\n", c.Example)
		}
		if fl := c.NonInheritedFlags(); fl.HasAvailableFlags() {
			fmt.Fprintf(&b, "Flags:\n\n```\n%s```\n\n", fl.FlagUsagesWrapped(100))
		}
		if subs := c.Commands(); len(subs) > 0 {
			b.WriteString("Subcommands:")
			for _, s := range subs {
				if !s.Hidden {
					fmt.Fprintf(&b, " [%s](#%s)", s.Name(), anchor(s.CommandPath()))
				}
			}
			b.WriteString("\n\n")
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

func anchor(s string) string { return strings.ReplaceAll(strings.ToLower(s), " ", "-") }
