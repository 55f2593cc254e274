//go:build nftpolicy_profile

package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
)

// Built with the tag nftpolicy_profile (agentproc.Build, for the benchmarks; the product is
// built without it), the agent writes Go profiles: with NFTPOLICY_CPUPROFILE=<file> it profiles
// its CPU from its start; on SIGUSR1 it ends that profile and, with NFTPOLICY_HEAPPROFILE=<file>,
// writes its live heap (after a collection). Each file is written beside its name and renamed
// into place when complete, so that a reader waits for the name.
func init() {
	cpu, heap := os.Getenv("NFTPOLICY_CPUPROFILE"), os.Getenv("NFTPOLICY_HEAPPROFILE")
	if cpu == "" && heap == "" {
		return
	}
	var cpuFile *os.File
	if cpu != "" {
		f, err := os.Create(cpu + ".part")
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "nftpolicy: CPU profile:", err)
			os.Exit(1)
		}
		cpuFile = f
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		<-usr1
		signal.Stop(usr1)
		if cpuFile != nil {
			pprof.StopCPUProfile()
			finish(cpuFile, cpu, nil)
		}
		if heap != "" {
			runtime.GC()
			f, err := os.Create(heap + ".part")
			if err == nil {
				err = pprof.WriteHeapProfile(f)
			}
			finish(f, heap, err)
		}
	}()
}

// finish closes a profile written to name.part and renames it to name; it reports a failure on
// stderr, where the agent's log goes.
func finish(f *os.File, name string, err error) {
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Rename(name+".part", name)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nftpolicy: profile:", err)
	}
}
