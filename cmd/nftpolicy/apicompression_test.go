package main

import (
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// TestAPICompression checks what the agent's API client asks the API server for: gzipped answers
// unless --api-compression=false or the kubeconfig's disable-compression.
func TestAPICompression(t *testing.T) {
	for _, tc := range []struct {
		name               string
		flag               bool // --api-compression
		kubeconfigDisables bool // the kubeconfig's cluster has disable-compression: true
		wantGzipAccepted   bool
	}{
		{"default", true, false, true},
		{"--api-compression=false", false, false, false},
		{"default, the kubeconfig disables it", true, true, false},
		{"--api-compression=false, the kubeconfig disables it", false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			accepted := make(chan string, 1)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				accepted <- r.Header.Get("Accept-Encoding")
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"kind":"APIVersions","versions":["v1"]}`))
			}))
			srv.EnableHTTP2 = true // as the API server serves
			srv.StartTLS()
			defer srv.Close()
			ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
			cluster := "    server: " + srv.URL + "\n    certificate-authority-data: " + base64.StdEncoding.EncodeToString(ca) + "\n"
			if tc.kubeconfigDisables {
				cluster += "    disable-compression: true\n"
			}
			kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
			if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"+cluster+
				"contexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: t}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			rc, err := restConfig(kubeconfig, tc.flag)
			if err != nil {
				t.Fatal(err)
			}
			hc, err := rest.HTTPClientFor(rc) // as sync.NewClient makes its client of rc
			if err != nil {
				t.Fatal(err)
			}
			resp, err := hc.Get(srv.URL + "/api")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := strings.Contains(<-accepted, "gzip"); got != tc.wantGzipAccepted {
				t.Errorf("the API server was asked for gzipped answers: %v, want %v", got, tc.wantGzipAccepted)
			}
		})
	}
}
