// Command runc-nocap is an OCI runtime that runs runc with the capabilities that this machine
// cannot grant taken out of the bundle's config.json (and of an exec's process.json).
//
// A privileged container asks for every capability the runtime knows. A process whose
// capability bounding set lacks one of them (this sandbox's lacks CAP_SYS_RESOURCE) cannot hand
// it on, and runc fails with "unable to apply caps: operation not permitted". dockerd takes
// this program as its default runtime (--add-runtime nocap=… --default-runtime nocap), so kind's
// privileged node containers start with every capability the machine has.
//
// The capabilities removed are those missing from this process's own bounding set, read from
// /proc/self/status; the real runc is $RUNC_NOCAP_RUNC, else the first runc on a fixed list.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// capNames are the kernel's capability numbers' names (linux/capability.h), 0 to 40.
var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK",
	"CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE",
	"CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

// missing returns the names of the capabilities absent from this process's bounding set.
func missing() (map[string]bool, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		hex, ok := strings.CutPrefix(line, "CapBnd:")
		if !ok {
			continue
		}
		bnd, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			return nil, err
		}
		out := map[string]bool{}
		for i, name := range capNames {
			if bnd&(1<<uint(i)) == 0 {
				out[name] = true
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("no CapBnd in /proc/self/status")
}

// strip removes the missing capabilities from every set of a process object
// ({"capabilities": {"bounding": [...], ...}}); it reports whether it changed anything.
func strip(process map[string]any, drop map[string]bool) bool {
	caps, _ := process["capabilities"].(map[string]any)
	changed := false
	for set, v := range caps {
		list, _ := v.([]any)
		kept := list[:0:0]
		for _, c := range list {
			if s, _ := c.(string); drop[s] {
				changed = true
				continue
			}
			kept = append(kept, c)
		}
		caps[set] = kept
	}
	return changed
}

// rewrite applies strip to a JSON file; inProcess says the file is a config.json (whose process
// is under "process") rather than a process.json.
func rewrite(path string, underProcess bool, drop map[string]bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	process := doc
	if underProcess {
		process, _ = doc["process"].(map[string]any)
		if process == nil {
			return nil
		}
	}
	if !strip(process, drop) {
		return nil
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, info.Mode().Perm())
}

func realRunc() string {
	if p := os.Getenv("RUNC_NOCAP_RUNC"); p != "" {
		return p
	}
	self, _ := os.Executable()
	for _, p := range []string{"/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc.real", "/usr/local/bin/runc"} {
		if info, err := os.Stat(p); err == nil && !info.IsDir() && p != self {
			return p
		}
	}
	return "runc"
}

func main() {
	args := os.Args[1:]
	drop, err := missing()
	if err != nil {
		fmt.Fprintln(os.Stderr, "runc-nocap:", err)
		os.Exit(1)
	}
	if len(drop) > 0 {
		// Find the subcommand (the first word that is not a global flag or its value) and the
		// files it reads: create/run read <bundle>/config.json, exec reads --process FILE.
		cmd, bundle, process := "", ".", ""
		for i := 0; i < len(args); i++ {
			a := args[i]
			value := func() string {
				if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "-") {
					return v
				}
				if i+1 < len(args) {
					i++
					return args[i]
				}
				return ""
			}
			switch {
			case cmd == "" && (a == "--root" || a == "--log" || a == "--log-format" || a == "--criu" || a == "--rootless"):
				value()
			case cmd == "" && !strings.HasPrefix(a, "-"):
				cmd = a
			case cmd != "" && (a == "--bundle" || a == "-b" || strings.HasPrefix(a, "--bundle=")):
				bundle = value()
			case cmd != "" && (a == "--process" || a == "-p" || strings.HasPrefix(a, "--process=")):
				process = value()
			}
		}
		switch cmd {
		case "create", "run":
			if err := rewrite(filepath.Join(bundle, "config.json"), true, drop); err != nil {
				fmt.Fprintln(os.Stderr, "runc-nocap:", err)
				os.Exit(1)
			}
		case "exec":
			if process != "" {
				if err := rewrite(process, false, drop); err != nil {
					fmt.Fprintln(os.Stderr, "runc-nocap:", err)
					os.Exit(1)
				}
			}
		}
	}
	runc := realRunc()
	err = syscall.Exec(runc, append([]string{runc}, args...), os.Environ())
	fmt.Fprintln(os.Stderr, "runc-nocap: exec", runc+":", err)
	os.Exit(1)
}
