package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// env is what a command reads and writes besides its arguments.
type env struct {
	getenv         func(string) string
	stdout, stderr io.Writer
}

// command is one subcommand of nftpolicy. Its flag set is named "nftpolicy NAME", which is how
// printUsage finds the synopsis and summary that head the flags.
type command struct {
	name     string
	synopsis string // the command line, flags in brackets when optional
	summary  string // what it does, one line
	run      func(ctx context.Context, args []string, e env) error
}

// commands are nftpolicy's subcommands, in the order the help lists them.
func commands() []command {
	return []command{
		{"run", "nftpolicy [run] [flags]",
			"run the agent: program this node's table from the cluster's policies",
			func(ctx context.Context, args []string, e env) error { return runAgent(ctx, args, e) }},
		{"render", "nftpolicy render -f DIR --node NAME [--table NAME]",
			"print, offline, the table the agent would program for manifests",
			func(_ context.Context, args []string, e env) error { return render(args, e) }},
		{"explain", "nftpolicy explain [-f DIR] --from NS/POD|node/NODE|IP --to NS/POD|node/NODE[:PORT]|IP --port PORT/PROTO [-6] [--node-sets NODE] [-o json]",
			"explain one flow's verdict and what decided it",
			explainFlow},
		{"trace", "nftpolicy trace [--from IP|node/NODE] [--to IP|node/NODE[:PORT]] [--port PORT/PROTO] [--packets N] [--timeout D] [-o json]",
			"trace real packets of one flow through this node's nftables tables",
			traceFlow},
		{"cleanup", "nftpolicy cleanup [--table NAME]",
			"remove the agent's table from this network namespace",
			func(_ context.Context, args []string, e env) error { return cleanup(args, e) }},
		{"probe", "nftpolicy probe --socket PATH [--timeout D] healthz|readyz",
			"ask the agent behind a health socket whether it is live or ready (exit 0) or not (exit 1)",
			probe},
		{"version", "nftpolicy version",
			"print the version",
			func(_ context.Context, args []string, e env) error { return printVersion(args, e) }},
		{"help", "nftpolicy help [COMMAND]",
			"list the commands, or print one command's usage and flags",
			help},
	}
}

// lookup finds a command by name.
func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// isHelpFlag reports whether arg asks for help in the flag package's spellings.
func isHelpFlag(arg string) bool {
	switch arg {
	case "-h", "-help", "--h", "--help":
		return true
	}
	return false
}

// printCommands lists the commands, one line each, and says how to get each one's flags.
func printCommands(w io.Writer) {
	fmt.Fprint(w, "nftpolicy is a per-node Kubernetes network-policy agent that programs nftables.\n\n"+
		"usage: nftpolicy [COMMAND] [flags]\n\ncommands:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	_ = tw.Flush()
	fmt.Fprint(w, "\nWithout a command nftpolicy runs the agent: nftpolicy --node-name=NODE is\n"+
		"nftpolicy run --node-name=NODE.\n\n"+
		"A command's usage and flags: nftpolicy help COMMAND, nftpolicy COMMAND --help.\n")
}

// help lists the commands (no argument) or prints one command's usage and flags.
func help(ctx context.Context, args []string, e env) error {
	fs := flag.NewFlagSet("nftpolicy help", flag.ContinueOnError)
	if err := parseFlags(fs, args, e.stdout); err != nil {
		return err
	}
	switch fs.NArg() {
	case 0:
		printCommands(e.stdout)
		return nil
	case 1:
		c, ok := lookup(fs.Arg(0))
		if !ok {
			printCommands(e.stderr)
			return usageErrorf("unknown command %q", fs.Arg(0))
		}
		// every command parses its flags first: -h prints its usage and ends it (flag.ErrHelp)
		return c.run(ctx, []string{"-h"}, e)
	default:
		return usageErrorf("help takes one command, got %s", strings.Join(fs.Args(), " "))
	}
}

// printVersion prints the binary's version.
func printVersion(args []string, e env) error {
	fs := flag.NewFlagSet("nftpolicy version", flag.ContinueOnError)
	if err := parseFlags(fs, args, e.stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	fmt.Fprintln(e.stdout, "nftpolicy", version)
	return nil
}

// printUsage prints a command's synopsis, what it does, and its flags with their defaults.
func printUsage(fs *flag.FlagSet, w io.Writer) {
	name := strings.TrimPrefix(fs.Name(), "nftpolicy ")
	if c, ok := lookup(name); ok {
		fmt.Fprintf(w, "usage: %s\n\n%s.\n", c.synopsis, strings.ToUpper(c.summary[:1])+c.summary[1:])
	} else {
		fmt.Fprintf(w, "usage of %s:\n", fs.Name())
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprint(w, "\nflags:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
}
