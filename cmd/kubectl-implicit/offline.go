package main

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/implicit-dev/implicit-apiserver/pkg/offline"
)

// errTestsFailed tells run that a test failed: exit 1, not an error.
var errTestsFailed = errors.New("tests failed")

// inputError is bad input to test or an offline diff: exit 2.
type inputError struct{ err error }

func (e *inputError) Error() string { return e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }

// offlineServerFlags are the server's flags that change what files mean.
type offlineServerFlags struct {
	opts    offline.Options
	exclude string
	now     string
}

func (f *offlineServerFlags) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.opts.GlobalNamespace, "global-namespace", "implicit-global", "The server's --global-namespace.")
	cmd.Flags().StringVar(&f.exclude, "exclude-namespaces", "kube-system,kube-public,kube-node-lease", "The server's --exclude-namespaces: never tenants.")
	cmd.Flags().IntVar(&f.opts.MaxDepth, "max-depth", 0, "The server's --max-depth (0: no limit).")
	cmd.Flags().StringVar(&f.now, "now", "", "The reference time (RFC3339, default: the current time): each exception ended by then is marked expired, as the server marks it at its end.")
}

func (f *offlineServerFlags) options() (offline.Options, error) {
	o := f.opts
	if f.now != "" {
		t, err := time.Parse(time.RFC3339, f.now)
		if err != nil {
			return o, fmt.Errorf("--now %q: want an RFC3339 time, e.g. 2026-12-01T00:00:00Z", f.now)
		}
		o.Now = t
	}
	o.ExcludeNamespaces = []string{}
	for _, ns := range strings.Split(f.exclude, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			o.ExcludeNamespaces = append(o.ExcludeNamespaces, ns)
		}
	}
	return o, nil
}

func (o *options) testCommand() *cobra.Command {
	var sf offlineServerFlags
	cmd := &cobra.Command{
		Use:   "test DIR",
		Short: "Check a directory's ImplicitTest expectations against its manifests, with no cluster",
		Long: `test reads DIR's manifests (plain YAML or JSON, multi-document files and
Lists: kustomize build or helm template output; kustomizations and charts are
never built, nothing is executed, no network; symbolic links leaving DIR are
refused) as the server would see them once applied to a cluster: namespaces
with their parent labels and exclusions, the sources of every served kind (an
ImplicitConfiguration in DIR lists them; else RoleBindings, Roles and
NetworkPolicies), locks, candidates, and the RBAC objects. Then it checks each
ImplicitTest document (apiVersion test.implicit.dev/v1alpha1) in DIR with the
server's own code: a namespace's view holds items (with scope and source
namespace) or lacks them; an edit is refused by the admission guards, with a
reason, or allowed; a requester may or may not do something in a namespace
(RBAC of the files, then the authorization webhook's inherited answer).

What files can't say is stated: a parent is the namespace named (files carry
no uids); permission checks (unlock, the parent's update, stage) are judged
for the requester a test names (default: a member of system:masters), with
the RBAC objects in DIR. Overlays merge with the schemas of the built-in
kinds (client-go's) and of the CustomResourceDefinitions in DIR. Exceptions
ended by --now (default: the current time) are marked expired, as the server
marks them at their end.

Output: a table of every check (-o wide: with the passes' details), -o json,
or -o junit for CI. Exit status: 0 when every check passes, 1 when one fails,
2 on bad input (a malformed manifest or test).`,
		Example: `  kubectl implicit test policies/
  kubectl implicit test policies/ -o junit > report.xml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch o.output {
			case "", "wide", "json", "junit":
			default:
				return &inputError{fmt.Errorf("--output %q: want json, junit or wide (default: a table)", o.output)}
			}
			start := time.Now()
			opts, err := sf.options()
			if err != nil {
				return &inputError{err}
			}
			w, err := loadWorld(args[0], opts)
			if err != nil {
				return &inputError{err}
			}
			if len(w.Tests) == 0 {
				return &inputError{fmt.Errorf("%s holds no ImplicitTest document (apiVersion %s)", args[0], offline.TestAPIVersion)}
			}
			results, err := w.RunTests(cmd.Context())
			if err != nil {
				return &inputError{err}
			}
			if err := printResults(cmd.OutOrStdout(), o.output, results, w.Now(), time.Since(start)); err != nil {
				return err
			}
			for _, r := range results {
				if !r.Pass {
					return errTestsFailed
				}
			}
			return nil
		},
	}
	sf.addFlags(cmd)
	return cmd
}

// loadWorld reads dir's manifests and builds their world.
func loadWorld(dir string, opts offline.Options) (*offline.World, error) {
	objs, err := readDir(dir)
	if err != nil {
		return nil, err
	}
	return offline.Build(objs, opts)
}

func readDir(dir string) ([]offline.Object, error) {
	files, err := offline.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	return offline.Decode(files)
}

func printResults(w io.Writer, format string, results []offline.Result, now time.Time, took time.Duration) error {
	failed := 0
	for _, r := range results {
		if !r.Pass {
			failed++
		}
	}
	switch format {
	case "json":
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		if results == nil {
			results = []offline.Result{}
		}
		return e.Encode(struct {
			Results []offline.Result `json:"results"`
			Passed  int              `json:"passed"`
			Failed  int              `json:"failed"`
			// Now is the reference time of the exceptions' ends.
			Now time.Time `json:"now"`
		}{results, len(results) - failed, failed, now.UTC().Truncate(time.Second)})
	case "junit":
		return printJUnit(w, results, took)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TEST\tCHECK\tRESULT\tDETAIL")
	for _, r := range results {
		res, detail := "Pass", ""
		if !r.Pass {
			res, detail = "Fail", r.Detail
		} else if format == "wide" {
			detail = r.Detail
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Test, r.Check, res, detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d checks: %d passed, %d failed (exceptions' ends as of %s)\n", len(results), len(results)-failed, failed, now.UTC().Format(time.RFC3339))
	return err
}

// junit is the JUnit XML CI systems read: one suite per ImplicitTest, one
// case per check.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

func printJUnit(w io.Writer, results []offline.Result, took time.Duration) error {
	var out junitSuites
	index := map[string]int{}
	for _, r := range results {
		i, ok := index[r.Test]
		if !ok {
			i = len(out.Suites)
			index[r.Test] = i
			out.Suites = append(out.Suites, junitSuite{Name: r.Test})
		}
		s := &out.Suites[i]
		c := junitCase{Name: r.Check, Classname: "implicit." + r.Test}
		if !r.Pass {
			c.Failure = &junitFailure{Message: r.Detail, Text: r.From + ": " + r.Detail}
			s.Failures++
		}
		s.Tests++
		s.Cases = append(s.Cases, c)
	}
	for i := range out.Suites {
		out.Suites[i].Time = fmt.Sprintf("%.3f", took.Seconds()/float64(len(out.Suites)))
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	e := xml.NewEncoder(w)
	e.Indent("", "  ")
	if err := e.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// offlineDiff are diff's --from/--to flags.
type offlineDiff struct {
	from, to string
	showData bool
	server   offlineServerFlags
}

func (f *offlineDiff) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.from, "from", "", "Offline: the manifests before, a directory or a Git ref (REF or REF:PATH).")
	cmd.Flags().StringVar(&f.to, "to", "", "Offline: the manifests after, a directory or a Git ref (REF or REF:PATH).")
	cmd.Flags().BoolVar(&f.showData, "show-data", false, "Offline: print the values of changed fields (Secrets' and ConfigMaps' included); by default only their paths.")
	f.server.addFlags(cmd)
}

func (o *options) runOfflineDiff(cmd *cobra.Command, f offlineDiff) error {
	switch o.output {
	case "", "markdown", "json":
	default:
		return fmt.Errorf("--output %q: with --from/--to, want markdown or json (default: text)", o.output)
	}
	if f.from == "" || f.to == "" {
		return errors.New("--from and --to go together")
	}
	fromObjs, err := readSide(cmd, f.from, f.to)
	if err != nil {
		return fmt.Errorf("--from %s: %w", f.from, err)
	}
	toObjs, err := readSide(cmd, f.to, f.from)
	if err != nil {
		return fmt.Errorf("--to %s: %w", f.to, err)
	}
	r := offline.Requester{}
	if o.config.Impersonate != nil && *o.config.Impersonate != "" {
		r.User = *o.config.Impersonate
		if o.config.ImpersonateGroup != nil {
			r.Groups = *o.config.ImpersonateGroup
		}
	}
	opts, err := f.server.options()
	if err != nil {
		return &inputError{err}
	}
	rep, err := offline.Diff(cmd.Context(), fromObjs, toObjs, opts, offline.DiffOptions{Requester: r, ShowData: f.showData})
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	switch o.output {
	case "json":
		e := json.NewEncoder(out)
		e.SetIndent("", "  ")
		err = e.Encode(rep)
	case "markdown":
		err = offline.WriteMarkdown(out, rep, f.from, f.to)
	default:
		err = offline.WriteText(out, rep)
	}
	if err != nil {
		return err
	}
	if len(rep.Namespaces) > 0 || rep.Refused() {
		return errChanged
	}
	return nil
}

// readSide reads one side of an offline diff: a directory when one exists
// at that path, else a Git ref, REF or REF:PATH, of the repository that
// holds other when other is a directory (else the current directory's).
// REF alone reads the path of other within its repository when other is a
// directory, else the whole tree.
func readSide(cmd *cobra.Command, side, other string) ([]offline.Object, error) {
	if st, err := os.Stat(side); err == nil && st.IsDir() {
		return readDir(side)
	}
	ref, dir, hasPath := strings.Cut(side, ":")
	repo := "."
	if st, err := os.Stat(other); err == nil && st.IsDir() {
		top, err := offline.GitTop(cmd.Context(), other)
		if err != nil {
			return nil, fmt.Errorf("%s is not a directory, and %s is in no Git repository to read it as a ref from", side, other)
		}
		repo = top
		if !hasPath {
			abs, _ := filepath.Abs(other)
			abs, _ = filepath.EvalSymlinks(abs)
			rel, err := filepath.Rel(top, abs)
			if err != nil {
				return nil, err
			}
			dir = filepath.ToSlash(rel)
		}
	}
	top, err := offline.GitTop(cmd.Context(), repo)
	if err != nil {
		return nil, fmt.Errorf("%s is not a directory, and the current directory is in no Git repository to read it as a ref from", side)
	}
	files, err := offline.ReadGitTree(cmd.Context(), top, ref, dir)
	if err != nil {
		return nil, err
	}
	return offline.Decode(files)
}
