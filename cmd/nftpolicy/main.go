// Command nftpolicy is the per-node network-policy agent. See doc.go.
package main

import (
	"fmt"
	"os"
)

// version is set at build time (-X main.version=...).
var version = "dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "version" {
		fmt.Println("nftpolicy", version)
		return
	}
	fmt.Fprintln(os.Stderr, "nftpolicy: the agent is not wired yet (issue 7); only `nftpolicy version` works")
	os.Exit(2)
}
