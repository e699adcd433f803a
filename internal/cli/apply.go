package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svcdns/svc/internal/api"
	"github.com/svcdns/svc/internal/manifest"
)

// readManifests reads objects from files, directories (.yaml, .yml, .json;
// recursive with -R) and "-" (standard input).
func (a *app) readManifests(paths []string, recursive bool) ([]map[string]any, error) {
	if len(paths) == 0 {
		return nil, errors.New("-f is required: a file, a directory or - for standard input")
	}
	var out []map[string]any
	var errs []error
	add := func(source string, r io.Reader) {
		objs, err := manifest.DecodeReader(source, r)
		if err != nil {
			errs = append(errs, err)
		}
		for _, o := range objs {
			out = append(out, o.Object)
		}
	}
	for _, p := range paths {
		if p == "-" {
			add("<stdin>", a.stdin)
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("-f %s: %w", p, err)
		}
		if !st.IsDir() {
			f, err := os.Open(p)
			if err != nil {
				return nil, fmt.Errorf("-f %s: %w", p, err)
			}
			add(p, f)
			f.Close()
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != p && !recursive {
					return filepath.SkipDir
				}
				return nil
			}
			switch strings.ToLower(filepath.Ext(path)) {
			case ".yaml", ".yml", ".json":
			default:
				return nil
			}
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			add(path, f)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("-f %s: %w", p, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(out) == 0 {
		return nil, errors.New("no objects found")
	}
	return out, nil
}

// defaultNamespaces gives namespaced objects without a namespace the one of
// -n or the context, as kubectl does.
func (a *app) defaultNamespaces(objs []map[string]any) {
	ns := a.namespace()
	for _, o := range objs {
		k, _ := o["kind"].(string)
		ki, err := a.resolveKind(k)
		if err != nil || !ki.Namespaced {
			continue
		}
		md, _ := o["metadata"].(map[string]any)
		if md == nil {
			continue
		}
		if n, _ := md["namespace"].(string); n == "" {
			md["namespace"] = ns
		}
	}
}

// applyObjects posts every object in one request: the server checks all
// before it stores any.
func (a *app) applyObjects(ctx context.Context, objs []map[string]any) ([]api.ApplyResult, error) {
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	var res api.ListBody[api.ApplyResult]
	if err := c.Do(ctx, request{method: http.MethodPost, path: "/apply", body: objs, out: &res}); err != nil {
		return nil, err
	}
	return res.Items, nil
}

// printApplyResults prints "kind/name result" lines (or JSON/YAML) and fails
// when one object failed.
func (a *app) printApplyResults(results []api.ApplyResult) error {
	// Warnings go to stderr in every output format (-o json carries them
	// too): the objects were applied, so the exit code stays 0.
	// Notes (whom a list or policy reaches now) go there too, so stdout
	// stays one "kind/name result" line per object.
	for _, r := range results {
		for _, w := range r.Warnings {
			fmt.Fprintf(a.stderr, "Warning: %s\n", w)
		}
		for _, n := range r.Notes {
			fmt.Fprintln(a.stderr, n)
		}
	}
	if ok, err := writeData(a.stdout, a.g.Output, results); ok {
		if err != nil {
			return err
		}
	} else {
		for _, r := range results {
			ref := strings.ToLower(r.Kind) + "/" + r.Name
			if a.g.Output == outName {
				fmt.Fprintln(a.stdout, ref)
				continue
			}
			if r.Result == "error" {
				fmt.Fprintf(a.stdout, "%s error: %s", ref, r.Error)
				if r.Hint != "" {
					fmt.Fprintf(a.stdout, " (hint: %s)", r.Hint)
				}
				fmt.Fprintln(a.stdout)
				continue
			}
			fmt.Fprintf(a.stdout, "%s %s\n", ref, r.Result)
		}
	}
	failed := 0
	for _, r := range results {
		if r.Result == "error" {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d objects failed", failed, len(results))
	}
	return nil
}

// printRefusals reports a refused multi-object apply per object: POST
// /apply checks every object first and stores none when one is refused
// (error.objects lists the refusals), so the rest are "not applied".
func (a *app) printRefusals(objs []map[string]any, ae *APIError) {
	refused := map[string]api.ApplyResult{}
	for _, r := range ae.Objects {
		refused[r.Kind+"/"+r.Namespace+"/"+r.Name] = r
	}
	for _, o := range objs {
		kind, _ := o["kind"].(string)
		md, _ := o["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		ns, _ := md["namespace"].(string)
		ref := strings.ToLower(kind) + "/" + name
		r, ok := refused[kind+"/"+ns+"/"+name]
		if !ok {
			r, ok = refused[kind+"//"+name]
		}
		if !ok {
			fmt.Fprintf(a.stdout, "%s not applied (nothing is applied when an object is refused)\n", ref)
			continue
		}
		fmt.Fprintf(a.stdout, "%s error: %s", ref, r.Error)
		if r.Hint != "" {
			fmt.Fprintf(a.stdout, " (hint: %s)", r.Hint)
		}
		fmt.Fprintln(a.stdout)
	}
}

func newApplyCmd(a *app) *cobra.Command {
	var files []string
	var recursive bool
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|-",
		Short: "Create or update objects from manifests (all checked before any is stored)",
		Long: "Reads multi-document YAML, a JSON object, a JSON array or a List and sends every object in one " +
			"POST /apply. The server checks all objects first, so a refused object leaves nothing half-applied.\n\n" +
			"What the data plane could not serve is refused (exit 1) with the field, the value and what is expected, " +
			"e.g. spec.endpoints[0].targets[0]: Invalid value: \"192.0.2.300\": ... expected an IPv4 address, e.g. \"192.0.2.10\"; " +
			"unknown service ids and time zones get a did-you-mean. Objects accepted but not (fully) in effect, such as a " +
			"policy naming a list that does not exist yet or a record set whose zone does not exist, print " +
			"\"Warning: ...\" lines on stderr and the exit code stays 0; -o json carries them in each result's warnings.\n\n" +
			"For every BlockList and Policy a line on stderr says whom it reaches now, e.g. \"blocklist/ads applies to " +
			"everyone except policies kids\" or \"policy/kids gets lists ads (global); opted out of ui-allow\" (notes in -o json).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, err := a.readManifests(files, recursive)
			if err != nil {
				return err
			}
			a.defaultNamespaces(objs)
			res, err := a.applyObjects(cmd.Context(), objs)
			var ae *APIError
			if errors.As(err, &ae) && len(ae.Objects) > 0 && a.g.Output != outJSON && a.g.Output != outYAML {
				// All or nothing: one line per object, the refused ones with
				// why, the others saying they were not applied either.
				a.printRefusals(objs, ae)
			}
			if err != nil {
				return err
			}
			return a.printApplyResults(res)
		},
	}
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "file, directory or - (repeatable)")
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "read directories recursively")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func newRestoreCmd(a *app) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "restore -f FILE",
		Short: "Put a backup back: settings, objects (through POST /apply) and local users; unchanged ones say so",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runRestore(cmd.Context(), file)
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "backup file written by `svc backup`")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func newDeleteCmd(a *app) *cobra.Command {
	var files []string
	var recursive, ignoreNotFound bool
	cmd := &cobra.Command{
		Use:               "delete KIND NAME... | -f FILE|DIR|-",
		Short:             "Delete objects by name or as listed in manifests",
		ValidArgsFunction: a.completeKindThenNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			type target struct{ kind, ns, name string }
			var targets []target
			switch {
			case len(files) > 0:
				if len(args) > 0 {
					return errors.New("give either KIND NAME... or -f, not both")
				}
				objs, err := a.readManifests(files, recursive)
				if err != nil {
					return err
				}
				for i := len(objs) - 1; i >= 0; i-- {
					md, _ := objs[i]["metadata"].(map[string]any)
					ns, _ := md["namespace"].(string)
					k, _ := objs[i]["kind"].(string)
					targets = append(targets, target{k, ns, nameOf(objs[i])})
				}
			case len(args) >= 2:
				for _, n := range args[1:] {
					targets = append(targets, target{args[0], "", n})
				}
			default:
				return errors.New("give KIND NAME... or -f FILE")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			failed := 0
			for _, t := range targets {
				ki, err := a.resolveKind(t.kind)
				if err != nil {
					return err
				}
				ns := t.ns
				if ns == "" {
					ns = a.namespace()
				}
				ref := strings.ToLower(ki.Kind) + "/" + t.name
				err = c.Do(cmd.Context(), request{method: http.MethodDelete, path: objectPath(ki, ns, t.name)})
				switch {
				case err == nil:
					fmt.Fprintf(a.stdout, "%s deleted\n", ref)
				case isNotFound(err) && ignoreNotFound:
				default:
					failed++
					printErr(a.stderr, fmt.Errorf("%s: %w", ref, err))
				}
			}
			if failed > 0 {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "delete the objects of these manifests")
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "read directories recursively")
	cmd.Flags().BoolVar(&ignoreNotFound, "ignore-not-found", false, "treat a missing object as deleted")
	return cmd
}
