package chaos

import (
	"os"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
)

// srv is the package's one API server, nil when it could not start. TestChaos restarts it.
var srv *kube.Server

func TestMain(m *testing.M) { os.Exit(kube.SharedMain(m, &srv)) }
