package e2e

import (
	"os"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
)

// srv is the package's one API server (the fixture is heavy), nil when it could not start.
var srv *kube.Server

func TestMain(m *testing.M) { os.Exit(kube.SharedMain(m, &srv)) }
