package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
)

// The command-line conventions every sluice command follows (docs/reference/command-line.md):
//
//   - a listener is --<purpose>-address (--http-address, --admin-address,
//     --metrics-address, --health-address, ...); the empty string turns it
//     off;
//   - a duration or a count of 0 turns its feature off (or lifts its
//     limit); each flag's help says what 0 means where it is not "off";
//   - a list is comma-separated, and a list flag may also be repeated;
//   - every flag can also come from the environment as SLUICE_<FLAG> (upper
//     case, dashes to underscores: --drain-max-wait is
//     SLUICE_DRAIN_MAX_WAIT); the command line wins; a variable that is set
//     (even to "") is a value;
//   - a renamed flag keeps its old name as a deprecated alias for one
//     release, which logs a warning when used.

// flagSet is a flag.FlagSet with those conventions.
type flagSet struct {
	*flag.FlagSet
	// lookupEnv reads the environment (os.LookupEnv; tests swap it).
	lookupEnv func(string) (string, bool)
	// aliases maps a deprecated flag name to its current name.
	aliases map[string]string
	// warnings says which deprecated spellings the command line used; the
	// command logs them once its logger exists.
	warnings []string
}

func newFlagSet(name string, stderr io.Writer) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), lookupEnv: os.LookupEnv, aliases: map[string]string{}}
	fs.SetOutput(stderr)
	fs.Usage = fs.usage
	return fs
}

// envName is the environment variable of a flag: SLUICE_ and the flag's
// name in upper case, dashes turned to underscores.
func envName(flagName string) string {
	return "SLUICE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// alias declares old as a deprecated name of the flag current (declared
// before): setting it sets current and leaves a warning. Aliases have no
// environment variable.
func (fs *flagSet) alias(old, current string) {
	f := fs.Lookup(current)
	if f == nil {
		panic("flag alias " + old + " of undeclared --" + current) // programming error, caught by the unit tests
	}
	fs.aliases[old] = current
	fs.Var(&aliasValue{fs: fs, old: old, current: current, target: f.Value}, old, "deprecated: use --"+current)
}

// deprecate records the use of a deprecated spelling.
func (fs *flagSet) deprecate(format string, args ...any) {
	fs.warnings = append(fs.warnings, fmt.Sprintf(format, args...))
}

// parse parses args, then sets every flag the command line left alone
// from its environment variable, if that is set.
func (fs *flagSet) parse(args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		set[f.Name] = true
		set[fs.aliases[f.Name]] = true
	})
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || fs.aliases[f.Name] != "" {
			return
		}
		name := envName(f.Name)
		v, ok := fs.lookupEnv(name)
		if !ok {
			return
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("environment variable %s (--%s): invalid value %q: %w", name, f.Name, v, err))
		}
	})
	return errors.Join(errs...)
}

// usage prints the flags, each with its environment variable.
func (fs *flagSet) usage() {
	w := fs.Output()
	fmt.Fprintf(w, "usage: %s [flags]\n\nEvery flag can also be set as the environment variable SLUICE_<FLAG> (shown in brackets); the command line wins.\n\n", fs.Name())
	fs.VisitAll(func(f *flag.Flag) {
		typ, help := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s", f.Name)
		if typ != "" {
			fmt.Fprintf(w, " %s", typ)
		}
		fmt.Fprintf(w, "\n    \t%s", strings.ReplaceAll(help, "\n", "\n    \t"))
		if fs.aliases[f.Name] != "" {
			fmt.Fprintln(w)
			return
		}
		if !slices.Contains([]string{"", "0", "0s", "false", "[]"}, f.DefValue) {
			fmt.Fprintf(w, " (default %q)", f.DefValue)
		}
		fmt.Fprintf(w, " [$%s]", envName(f.Name))
		fmt.Fprintln(w)
	})
}

// aliasValue is a deprecated flag name: it sets its target.
type aliasValue struct {
	fs           *flagSet
	old, current string
	target       flag.Value
}

func (a *aliasValue) String() string {
	if a == nil || a.target == nil {
		return ""
	}
	return a.target.String()
}

func (a *aliasValue) Set(v string) error {
	a.fs.deprecate("--%s is deprecated and goes in the next release: use --%s", a.old, a.current)
	return a.target.Set(v)
}

// IsBoolFlag lets a deprecated boolean flag be given without a value.
func (a *aliasValue) IsBoolFlag() bool {
	b, ok := a.target.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// parseArgs is parse for a command with positional arguments, which flags
// may follow (sluice explain ingress a/b --output json); it returns the
// positional arguments.
func (fs *flagSet) parseArgs(args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return pos, fs.parse(nil) // the environment fills what the command line left alone
}

// printReport ends `sluice explain` or `sluice migrate`: it writes the
// report to stdout, indented JSON with output "json", else its text, and
// returns the exit status: 1 when the report found something (found), 2
// when it could not be written (said on stderr), else 0.
func printReport(stdout, stderr io.Writer, command, output string, rep fmt.Stringer, found bool) int {
	if output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "sluice %s: %v\n", command, err)
			return 2
		}
	} else {
		fmt.Fprint(stdout, rep.String())
	}
	if found {
		return 1
	}
	return 0
}

// usageError ends a command whose flags are wrong: 0 for -h, else the
// error and exit code 2.
func usageError(stderr io.Writer, command string, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "sluice %s: %v\n", command, err)
	return 2
}

// logDeprecated logs each deprecated spelling the command line used.
func logDeprecated(log *slog.Logger, warnings []string) {
	for _, w := range warnings {
		log.Warn(w)
	}
}

// listFlag is a list flag: repeatable, each value a comma-separated list;
// empty entries are skipped.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			*l = append(*l, e)
		}
	}
	return nil
}
