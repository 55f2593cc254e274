package kube_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

var srv *kube.Server

func TestMain(m *testing.M) { os.Exit(kube.SharedMain(m, &srv)) }

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestCreatePod(t *testing.T) {
	s := kube.Require(t, srv)
	ctx := ctxFor(t)
	if err := s.CreateNamespace(ctx, "pods", map[string]string{"team": "a"}); err != nil {
		t.Fatal(err)
	}
	ns, err := s.Client.CoreV1().Namespaces().Get(ctx, "pods", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels["team"] != "a" || ns.Labels["kubernetes.io/metadata.name"] != "pods" {
		t.Errorf("namespace labels = %v, want team=a and the automatic kubernetes.io/metadata.name=pods", ns.Labels)
	}

	ports := []corev1.ContainerPort{
		{Name: "http", ContainerPort: 80, Protocol: corev1.ProtocolTCP},
		{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
	}
	tests := []struct {
		name string
		ips  []string
	}{
		{"v4", []string{"10.244.1.2"}},
		{"v6", []string{"fd00:10:244:1::2"}},
		{"dual", []string{"10.244.1.3", "fd00:10:244:1::3"}},
		{"dual-v6-first", []string{"fd00:10:244:1::4", "10.244.1.4"}},
		{"no-ip", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ips []netip.Addr
			for _, a := range tc.ips {
				ips = append(ips, netip.MustParseAddr(a))
			}
			if _, err := s.CreatePod(ctx, "pods", tc.name, "node-1", map[string]string{"app": tc.name}, ports, ips); err != nil {
				t.Fatal(err)
			}
			// Read back what the API stored, not what the patch returned.
			p, err := s.Client.CoreV1().Pods("pods").Get(ctx, tc.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Status.Phase != corev1.PodRunning {
				t.Errorf("phase = %q, want Running", p.Status.Phase)
			}
			var got []string
			for _, a := range p.Status.PodIPs {
				got = append(got, a.IP)
			}
			if !slices.Equal(got, tc.ips) {
				t.Errorf("podIPs = %v, want %v", got, tc.ips)
			}
			wantIP := ""
			if len(tc.ips) > 0 {
				wantIP = tc.ips[0]
			}
			if p.Status.PodIP != wantIP {
				t.Errorf("podIP = %q, want %q", p.Status.PodIP, wantIP)
			}
			if p.Spec.NodeName != "node-1" || p.Labels["app"] != tc.name {
				t.Errorf("nodeName=%q labels=%v", p.Spec.NodeName, p.Labels)
			}
			if len(p.Spec.Containers) != 1 || !slices.Equal(p.Spec.Containers[0].Ports, ports) {
				t.Errorf("containers = %+v, want one with ports %+v", p.Spec.Containers, ports)
			}
			ready := false
			for _, c := range p.Status.Conditions {
				ready = ready || c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			}
			if !ready {
				t.Errorf("conditions = %+v, want Ready=True", p.Status.Conditions)
			}
		})
	}

	// PatchPodStatus changes only what it names: hostIP added, podIPs kept; then Succeeded.
	p, err := s.PatchPodStatus(ctx, "pods", "dual", corev1.PodStatus{
		HostIP: "192.168.50.1", HostIPs: []corev1.HostIP{{IP: "192.168.50.1"}, {IP: "fd00:50::1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.HostIP != "192.168.50.1" || len(p.Status.HostIPs) != 2 || len(p.Status.PodIPs) != 2 || p.Status.Phase != corev1.PodRunning {
		t.Errorf("after hostIP patch: status = %+v, want hostIPs added, podIPs and phase kept", p.Status)
	}
	if p, err = s.PatchPodStatus(ctx, "pods", "dual", corev1.PodStatus{Phase: corev1.PodSucceeded}); err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodSucceeded || p.Status.PodIP != "10.244.1.3" {
		t.Errorf("after phase patch: phase %q podIP %q, want Succeeded and 10.244.1.3", p.Status.Phase, p.Status.PodIP)
	}

	// Two addresses of one family are invalid: the API server, not the helper, says so.
	_, err = s.CreatePod(ctx, "pods", "two-v4", "node-1", nil, nil,
		[]netip.Addr{netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("10.244.1.6")})
	if !apierrors.IsInvalid(errors.Unwrap(err)) {
		t.Errorf("two IPv4 podIPs: err = %v, want Invalid", err)
	}
}

func daemonSet(name string, templateLabels map[string]string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: templateLabels},
				Spec: corev1.PodSpec{
					HostNetwork: true,
					Containers:  []corev1.Container{{Name: "agent", Image: "example.invalid/agent:1"}},
				},
			},
		},
	}
}

func TestDryRunDaemonSet(t *testing.T) {
	s := kube.Require(t, srv)
	ctx := ctxFor(t)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	tests := []struct {
		name      string
		ds        *appsv1.DaemonSet
		wantValid bool
	}{
		{"selector-matches-template", daemonSet("agent", map[string]string{"app": "agent"}), true},
		{"selector-does-not-match-template", daemonSet("broken", map[string]string{"app": "other"}), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Client.AppsV1().DaemonSets("kube-system").Create(ctx, tc.ds, dry)
			switch {
			case tc.wantValid && err != nil:
				t.Fatalf("dry-run create: %v", err)
			case !tc.wantValid && !apierrors.IsInvalid(err):
				t.Fatalf("dry-run create: err = %v, want Invalid", err)
			case tc.wantValid && got.Spec.RevisionHistoryLimit == nil:
				t.Errorf("dry-run result lacks server defaults (revisionHistoryLimit): %+v", got.Spec)
			}
			// Dry run persists nothing.
			if _, err := s.Client.AppsV1().DaemonSets("kube-system").Get(ctx, tc.ds.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("after dry run: get err = %v, want NotFound", err)
			}
		})
	}
}

func TestRestartAPIServer(t *testing.T) {
	s := kube.Require(t, srv)
	ctx := ctxFor(t)
	if err := s.CreateNamespace(ctx, "restart", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreatePod(ctx, "restart", "before", "node-1", nil, nil, []netip.Addr{netip.MustParseAddr("10.244.2.1")}); err != nil {
		t.Fatal(err)
	}

	// A client-go informer, as the agent uses, watching across the outage.
	added := make(chan string, 16)
	f := informers.NewSharedInformerFactoryWithOptions(s.Client, 0, informers.WithNamespace("restart"))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { added <- obj.(*corev1.Pod).Name },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer func() { close(stop); f.Shutdown() }()
	f.Start(stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	expectAdd(t, ctx, added, "before")

	start := time.Now()
	if err := s.RestartAPIServer(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("RestartAPIServer(1s downtime) took %v", time.Since(start))

	// The API kept its data (etcd was not touched) and the client works again.
	if _, err := s.Client.CoreV1().Pods("restart").Get(ctx, "before", metav1.GetOptions{}); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if _, err := s.CreatePod(ctx, "restart", "after", "node-1", nil, nil, []netip.Addr{netip.MustParseAddr("10.244.2.2")}); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	// The informer's watch re-established itself and sees the new pod.
	expectAdd(t, ctx, added, "after")
}

func expectAdd(t *testing.T, ctx context.Context, added <-chan string, want string) {
	t.Helper()
	for {
		select {
		case name := <-added:
			if name == want {
				return
			}
		case <-ctx.Done():
			t.Fatalf("informer saw no add of %q", want)
		}
	}
}

func TestKubeconfig(t *testing.T) {
	s := kube.Require(t, srv)
	ctx := ctxFor(t)
	port := s.URL[len("https://127.0.0.1:"):]
	tests := []struct {
		name, server, wantHost string
	}{
		{"default-server", "", s.URL},
		{"explicit-loopback", "https://127.0.0.1:" + port, "https://127.0.0.1:" + port},
		{"localhost-name", "https://localhost:" + port, "https://localhost:" + port},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "kubeconfig")
			if err := s.Kubeconfig(path, tc.server); err != nil {
				t.Fatal(err)
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", path)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.wantHost {
				t.Errorf("host = %q, want %q", cfg.Host, tc.wantHost)
			}
			c, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			// The admin identity may do anything (system:masters), TLS verified against the CA.
			if _, err := c.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}

	// A kubeconfig with a wrong token is refused: the file's token is what authenticates.
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := s.Kubeconfig(path, ""); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.BearerToken = "wrong"
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("wrong token: err = %v, want Unauthorized", err)
	}
}

// TestStop runs a second pair of its own and checks that Stop leaves nothing behind.
func TestStop(t *testing.T) {
	kube.Require(t, srv) // fails with the same message when the binaries are missing
	ctx := ctxFor(t)
	start := time.Now()
	s, err := kube.Start(ctx, kube.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Start took %v", time.Since(start))
	pids := s.PIDs()
	if len(pids) != 2 {
		t.Fatalf("PIDs = %v, want etcd and kube-apiserver", pids)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Errorf("Dir %s still there after Stop (stat err %v)", s.Dir, err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still there after Stop (kill 0: %v)", pid, err)
		}
	}
	if err := s.RestartAPIServer(ctx, 0); err == nil {
		t.Error("RestartAPIServer after Stop succeeded")
	}
}

// TestCollectGarbage: a Server started with Profiling runs its API server's collector on
// demand (the Go runtime's collection count in its metrics grows by one a call); one without
// refuses.
func TestCollectGarbage(t *testing.T) {
	ctx := ctxFor(t)
	if err := kube.Require(t, srv).CollectGarbage(ctx); err == nil || !strings.Contains(err.Error(), "Config.Profiling") {
		t.Errorf("CollectGarbage without Profiling: %v, want an error naming Config.Profiling", err)
	}
	s, err := kube.Start(ctx, kube.Config{Profiling: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	collections := func() int {
		n, err := s.Collections(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Three calls, at least three collections: one the API server ran by itself in between
	// could make a single call look effective.
	const calls = 3
	before := collections()
	for range calls {
		if err := s.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if after := collections(); after-before < calls {
		t.Errorf("the API server's collections: %d before %d CollectGarbage calls, %d after; want at least %d more", before, calls, after, calls)
	}
}
